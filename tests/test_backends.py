"""The results backends for real, from Debian's packages: a PostgreSQL server the results database
lives in (created, upgraded from an old schema, written by runners at once), and a Pushgateway that
real runs push their live samples to while a Prometheus scrapes it, queried through its HTTP API
as the Grafana dashboard queries it."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from reports import history, resultsdb

from support import backends, fakerun

ROOT = Path(__file__).resolve().parent.parent
DAY = 86_400_000


@pytest.fixture(scope="module")
def postgres_server():
    with backends.postgres() as url:
        yield url


def new_database(server: str, name: str) -> str:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.rsplit("/", 1)[0] + "/" + name


def test_postgres_takes_a_database_made_before_versions_were_kept_and_upgrades_it(postgres_server, tmp_path):
    url = new_database(postgres_server, "legacy")
    with psycopg.connect(url) as conn:   # as sfubench left it: two tables, no schema_version
        for statement in resultsdb.MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO runs (run, sfu, started, scenario, status) VALUES ('old-janus', 'janus', 1, 's', 'ok')")
        conn.execute("INSERT INTO metrics (run, name, value) VALUES ('old-janus', 'recv_bps', 1e6)")
    run = fakerun.make_run(tmp_path, rooms=2, seed=1)
    history.record(run, url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(resultsdb.VERSION,)]
        rows = dict(conn.execute("SELECT run, host FROM runs").fetchall())
        assert conn.execute("SELECT value FROM metrics WHERE run = 'old-janus'").fetchall() == [(1e6,)]
    assert rows == {"old-janus": None, run.name: json.loads((run / "meta.json").read_text())["machine"]["hostname"]}
    history.record(run, url)   # opened again: nothing left to migrate, the run replaced
    assert sorted(p["run"] for p in history.trend("janus", url, "recv_bps")["recv_bps"]) == sorted(rows)


def test_postgres_loses_nothing_when_runners_record_at_once(postgres_server, tmp_path):
    """Two processes open a new database at once (both find it unmigrated) and record six runs
    each: every run and every figure is there."""
    url = new_database(postgres_server, "fleet")
    script = ("import sys; from pathlib import Path; from reports import history; sys.path.insert(0, 'tests')\n"
              "from support import fakerun\n"
              "out = Path(sys.argv[1]); out.mkdir()\n"
              "runs = [fakerun.make_run(out, rooms=2, seed=s, start_ms=1_760_000_000_000 + s * 86_400_000,"
              " name=f'{out.name}-{s}-janus') for s in range(6)]\n"
              "sys.stdin.readline()\n"   # all made: record at the same moment as the other
              "for r in runs: history.record(r, sys.argv[2])\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / name), url], stdin=subprocess.PIPE,
                              cwd=ROOT, text=True, stderr=subprocess.PIPE) for name in ("a", "b")]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    runs = [p for name in ("a", "b") for p in sorted((tmp_path / name).iterdir())]
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (12,)
        stored = conn.execute("SELECT count(*) FROM metrics").fetchone()[0]
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(resultsdb.VERSION,)]
    from reports import metrics, runfiles
    assert stored == sum(len(history.values(metrics.analyse(runfiles.load(r)))) for r in runs)


def test_postgres_and_pushgateway_take_two_concurrent_loadtests_and_prometheus_sees_the_dashboards_data(
        postgres_server, tmp_path):
    """Two `make loadtest` runs at once (one Chromium and three synthetic participants each, their
    own labs), recording into one PostgreSQL and pushing to one Pushgateway: both are in `trend`,
    and every query of the Grafana dashboard returns data from Prometheus for each.

    The second run is given its results URL with a password in the environment, as a user keeps it
    off the command line: it is recorded all the same, and the password is in no file of its run
    folder (the report and meta.json included), nowhere in what it printed, and in no process's
    command line while the runs lasted. (The test server trusts local connections, so the password
    is carried, not checked: what is asserted is where it goes.)"""
    import secrets
    import psutil
    url = new_database(postgres_server, "nightly")
    password = "pw-" + secrets.token_hex(12)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE sfubench LOGIN SUPERUSER PASSWORD '{password}'")
    secret_url = url.replace("postgres@", f"sfubench:{password}@")
    with backends.pushgateway(tmp_path) as gateway, \
            backends.prometheus(tmp_path, gateway.removeprefix("http://")) as prom:
        procs = []
        for i, (prefix, subnet) in enumerate((("sfbpa", "127.0.21"), ("sfbpb", "127.0.22"))):
            out = tmp_path / f"runs{i}"
            args = f"--preset browsers --rooms 1 --users-per-room 4 --real-rooms 1 --real-per-room 1 " \
                   f"--ramp-samples 2 --target-samples 6 --quality-frames 0 --audio-seconds 0 --background-interval 2 " \
                   f"--lab-prefix {prefix} --lab-subnet {subnet} --out {out} --pushgateway {gateway}"
            env = {**os.environ, "SFUBENCH_RESULTS_DB": secret_url} if i else os.environ
            args += "" if i else f" --results-db {url}"
            log = open(tmp_path / f"runs{i}.log", "w+")
            procs.append((out, log, subprocess.Popen(["make", "-s", "loadtest", "SFU=inhouse", f"ARGS={args}"], cwd=ROOT,
                                                     stdout=log, stderr=subprocess.STDOUT, text=True, env=env)))
        shown, deadline = [], time.monotonic() + 600
        while any(p.poll() is None for _, _, p in procs):   # every command line, as `ps` shows them
            assert time.monotonic() < deadline, "the runs did not end in 10 minutes"
            for proc in psutil.process_iter(["cmdline"]):
                if password in " ".join(proc.info["cmdline"] or []):
                    shown.append(proc.info["cmdline"])
            time.sleep(0.2)
        assert not shown, shown
        runs = []
        for out, log, p in procs:
            log.seek(0)
            text = log.read()
            log.close()
            assert p.returncode == 0, text[-3000:]
            assert "pushgateway: live samples stopped" not in text and password not in text
            assert not [line for line in text.splitlines() if "history (" in line and "failed (" in line], text[-3000:]
            (run,) = [d for d in out.iterdir() if d.is_dir()]
            runs.append(run.name)
        files = [f for f in run.rglob("*") if f.is_file()]   # the second run's
        assert run / "report.html" in files and run / "meta.json" in files
        assert not [f for f in files if password.encode() in f.read_bytes()]
        assert "sfubench:***@" in (run / "meta.json").read_text()
        trend = subprocess.run([sys.executable, "-m", "sfubench.cli", "trend", "--sfu", "inhouse", "--db", url],
                               capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert trend.returncode == 0, trend.stdout + trend.stderr
        # started in the same second, the two runs have the same folder name: the database keeps both.
        # client_bound is recorded for every run; figures at target are left out of a run whose target
        # window was client-bound, which two runs sharing two cores can be
        keys = [p["run"] for p in history.trend("inhouse", url, "client_bound")["client_bound"]]
        assert len(keys) == 2 and sorted(k.split("@")[0] for k in keys) == sorted(runs), keys
        assert " 2 runs " in trend.stdout

        pushers = set()
        for run in set(runs):
            series = prom.query(f'sfubench_stream_bytes_total{{run="{run}"}}')
            labels = {k for s in series for k in s["metric"]}
            assert {"sfu", "run", "instance", "room", "user", "peer", "direction", "kind", "ssrc"} <= labels, labels
            assert {s["metric"]["sfu"] for s in series} == {"inhouse"}
            pushers |= {(run, s["metric"]["instance"]) for s in series}
        assert len(pushers) == 2   # each run's samples, however the runs were named
        # and each run's figures at target, percentiles included, as its report has them
        headlines = []
        for out, *_ in procs:
            (run,) = [d for d in out.iterdir() if d.is_dir()]
            h = json.loads((run / "tables.json").read_text())["headline"]
            headlines.append((round(h["fps_p95"], 6), round(h["recv_bps"], 3)))
        pushed, deadline = {}, time.monotonic() + 20
        while len(pushed) < 2 and time.monotonic() < deadline:   # until Prometheus has scraped both
            pushed = {}
            for run in set(runs):
                for s in prom.query(f'sfubench_result{{run="{run}",figure=~"fps|recv_bps"}}'):
                    pushed.setdefault(s["metric"]["instance"], {})[(s["metric"]["figure"], s["metric"]["stat"])] = \
                        float(s["value"][1])
            time.sleep(0.5)
        assert sorted((round(v[("fps", "p95")], 6), round(v[("recv_bps", "mean")], 3))
                      for v in pushed.values()) == sorted(headlines), (pushed, headlines)
        dashboard = json.loads((ROOT / "reports" / "grafana-dashboard.json").read_text())
        queries = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
        assert queries
        for run in runs:
            for q in queries:
                expr = q.replace("$sfu", "inhouse").replace("$run", run).replace("$__rate_interval", "5m")
                assert prom.query(expr), f"no data for {run}: {expr}"
        shot = graph_screenshot(prom, 'avg by (run, instance) (rate(sfubench_stream_bytes_total{direction="recv",'
                                      'kind="video",sfu="inhouse"}[5s]) * 8)', tmp_path / "prometheus-graph.png")
        assert shot.stat().st_size > 20_000


def graph_screenshot(prom: backends.Prometheus, expr: str, path: Path) -> Path:
    """What a team sees: Prometheus's own graph page (Debian's build serves the classic one) with the
    query drawn, once its lines are on the page. README shows one taken this way."""
    import time
    import urllib.parse

    from reports.verify import browser, screenshot_full_page
    url = f"{prom.url}/graph?" + urllib.parse.urlencode({"g0.expr": expr, "g0.tab": "0", "g0.range_input": "1m"})
    with browser(1280, 720) as driver:
        driver.get(url)
        deadline = time.monotonic() + 30
        while not driver.execute_script("return document.querySelectorAll('.graph_area svg path').length"):
            assert time.monotonic() < deadline, "the graph page drew no line: " + driver.page_source[:2000]
            time.sleep(0.2)
        return screenshot_full_page(driver, path)
