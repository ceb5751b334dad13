import json
import sqlite3
import statistics
import sys

import pytest

from reports import history, metrics, resultsdb, runfiles, verify

from support import fakerun

DAY = 86_400_000


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """Seven nightly janus runs, the last one much worse, plus a mediasoup run and a janus run of another
    scenario."""
    parent = tmp_path_factory.mktemp("runs")
    db = parent / "results.sqlite"
    runs = [fakerun.make_run(parent, rooms=4, seed=i, knee=21 if i == 6 else None,
                               start_ms=1_760_000_000_000 + i * DAY) for i in range(7)]
    runs.append(fakerun.make_run(parent, sfu="mediasoup", rooms=4, start_ms=1_760_000_000_000 + 3 * DAY))
    runs.append(fakerun.make_run(parent, rooms=3, config={"rooms": 3}, start_ms=1_760_000_000_000 + 5 * DAY + 1,
                                   name="other-scenario-janus"))
    for d in runs:
        history.record(d, db)
    return db, runs


def test_record_stores_runs_and_metrics(nights):
    db, runs = nights
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 9
        sfu, version, status, started = conn.execute(
            "SELECT sfu, version, status, started FROM runs WHERE run = ?", (runs[0].name,)).fetchone()
        names = {r[0] for r in conn.execute("SELECT name FROM metrics WHERE run = ?", (runs[0].name,))}
    assert (sfu, version, status, started) == ("janus", "1.1.2", "ok", 1_760_000_000_000)
    assert {"coped", "recv_bps", "rtt_send_ms", "check_pass_rate", "brisque", "server_cpu_per_participant"} <= names
    assert "knee" not in names   # no knee in a healthy run


def test_recording_again_replaces(nights, tmp_path):
    db, runs = nights
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(db.read_bytes())
    history.record(runs[0], copy)
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 9
        stored = conn.execute("SELECT count(*) FROM metrics WHERE run = ?", (runs[0].name,)).fetchone()[0]
    assert stored == len(history.values(metrics.analyse(runfiles.load(runs[0]))))


def test_trend_flags_the_bad_night_only(nights):
    db, runs = nights
    t = history.trend("janus", db)
    recv = t["recv_bps"]
    assert [p["run"] for p in recv] == [r.name for r in runs[:6]] + ["other-scenario-janus", runs[6].name]
    assert [p["regression"] for p in recv] == [False] * 7 + [True]
    assert all(p["low"] is None for p in recv[:3])            # fewer than 3 earlier runs: no band yet
    assert recv[3]["low"] is not None
    other = recv[6]
    assert other["low"] is None                                  # its scenario has no history
    last = recv[-1]
    assert last["value"] < last["low"] < last["median"] < last["high"]
    assert t["rtt_send_ms"][-1]["regression"]                   # lower is better: flagged above the band
    assert t["coped"][-1]["regression"]
    assert not any(p["improvement"] for p in recv)


def test_trend_of_one_metric_and_of_an_unknown_one(nights):
    db, _ = nights
    assert list(history.trend("janus", db, "vmaf")) == ["vmaf"]
    assert history.trend("nobody", db) == {}
    with pytest.raises(ValueError, match="unknown metric 'speed'"):
        history.trend("janus", db, "speed")


def test_band_uses_median_and_mad_with_a_floor():
    med, low, high = history.band([10, 11, 9, 10, 30], k=3)
    assert med == 10
    assert (low, high) == pytest.approx((10 - 3 * 1.4826, 10 + 3 * 1.4826))
    assert history.band([5, 5, 5], k=3) == pytest.approx((5, 5 - 0.3, 5 + 0.3))   # MAD 0: 2 % floor


def test_window_limits_the_history(tmp_path):
    db = tmp_path / "w.sqlite"
    for i in range(6):
        d = fakerun.make_run(tmp_path, rooms=2, seed=i, start_ms=1_760_000_000_000 + i * DAY)
        history.record(d, db)
    pts = history.trend("janus", db, "recv_bps", window=3, min_history=3)["recv_bps"]
    assert [p["low"] is None for p in pts] == [True, True, True, False, False, False]
    assert pts[5]["median"] == statistics.median(p["value"] for p in pts[2:5])


def test_postgres_url_needs_psycopg(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(resultsdb.DatabaseError, match=r"psycopg.*pip install") as err:
        history.sfus("postgresql://user:secret@db.example/results")
    assert "secret" not in str(err.value)


def test_trend_report_renders(nights, tmp_path):
    db, _ = nights
    path = history.build(db, tmp_path / "trend")
    problems = verify.check_rendered(path, expect=("fig-trend-recv_bps", "fig-trend-coped", "table-regressions",
                                                   "table-recent"), screenshot=tmp_path / "trend" / "report.png")
    assert problems == []
    page = path.read_text()
    assert "Regressions in each SFU" in page and "mediasoup" in page


def test_main(nights, tmp_path, capsys):
    db, runs = nights
    assert history.main(["trend", str(db), "janus", "knee"]) == 0
    assert history.main(["record", str(tmp_path / "new.sqlite"), str(runs[0])]) == 0
    assert runs[0].name in capsys.readouterr().out
    assert history.main(["bogus"]) == 2


def test_a_run_from_before_a_setting_existed_stays_in_its_scenarios_series(tmp_path):
    """Four nights recorded before `network` existed, a fifth that records it at its default: one
    series, so the fifth is judged against the four."""
    db = tmp_path / "results.sqlite"
    for i in range(5):
        extra = {} if i < 4 else {"network": "none"}
        run = fakerun.make_run(tmp_path, rooms=4, seed=i, start_ms=1_760_000_000_000 + i * DAY, config=extra)
        if i == 4:   # what the engine records now: the scenario's defaults beside it
            meta = json.loads((run / "meta.json").read_text())
            meta["scenario_defaults"] = {"network": "none"}
            (run / "meta.json").write_text(json.dumps(meta))
        history.record(run, db)
    points = history.trend("janus", db, "recv_bps")["recv_bps"]
    assert len({p["scenario"] for p in points}) == 1 and points[-1]["median"] is not None
