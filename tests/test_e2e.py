"""The whole path, for real: the CLI provisions the lab, starts the SFU and a Selenium Grid, drives
Chromium with fake media through a room of 7, and writes the run folder and report."""
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from reports import metrics
from sfubench.rundir import read

ROOT = Path(__file__).resolve().parent.parent
USERS = 7

pytestmark = pytest.mark.e2e


def loadtest(sfu: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    # Own lab names, so a developer's run beside the suite does not collide with it.
    cmd = [sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", sfu, "--rooms", "1",
           "--out", str(out), "--lab-prefix", "sfube", "--lab-subnet", "127.0.8",
           "--background-interval", "3", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="module")
def janus_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    r = loadtest("janus", out)
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert r.returncode == 0, f"loadtest failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert len(runs) == 1
    return runs[0], r


def test_every_video_of_a_room_of_seven_is_verified_playing(janus_run):
    run, r = janus_run
    checks = read(run, "checks")
    assert len(checks) == USERS * USERS, r.stdout[-2000:]
    failed = [c for c in checks if not c["ok"]]
    assert not failed, failed
    assert {(c["user"], c["peer"]) for c in checks} == {
        (f"r1u{a}", f"r1u{b}") for a in range(1, USERS + 1) for b in range(1, USERS + 1)}
    assert "checks: 49/49 videos verified playing" in r.stdout


def test_every_participant_sends_and_receives_at_target(janus_run):
    run, _ = janus_run
    target = [s for s in read(run, "samples") if s["phase"] == "target"]
    sent, received = defaultdict(float), defaultdict(float)
    for o in metrics.stream_windows(target):
        if o["kind"] == "video" and o["bps"]:
            if o["direction"] == "send":
                sent[o["user"]] += o["bps"]
            else:
                received[(o["user"], o["peer"])] += o["bps"]
    users = {f"r1u{i}" for i in range(1, USERS + 1)}
    assert set(sent) == users and all(v > 50_000 for v in sent.values()), sent
    assert set(received) == {(u, p) for u in users for p in users if u != p}
    assert all(v > 20_000 for v in received.values()), received


def test_run_folder_records_versions_events_and_quality(janus_run):
    run, r = janus_run
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "ok"
    assert "1.1.2" in meta["sfu"]["installed"]
    assert meta["chrome"]["version"].split(".")[0].isdigit()
    assert meta["cpu"]["clients_per_participant"] > 0 and meta["cpu"]["sfu_cores"] > 0
    events = [e["event"] for e in read(run, "events")]
    assert events[0] == "run_started" and events[-1] == "run_finished"
    assert "room_validated" in events and "target_reached" in events
    phases = {s["phase"] for s in read(run, "samples")}
    assert phases == {"ramp", "target", "background"}
    quality = read(run, "quality")
    decoded = [q for q in quality if q["code"] is not None]
    assert len(decoded) >= 0.9 * len(quality) > 0
    assert all(q["brisque"] is not None and q["psnr"] > 20 for q in decoded)
    delays = [q["delay_ms"] for q in decoded if q["delay_ms"] is not None]
    assert delays and 0 < sorted(delays)[len(delays) // 2] < 2000, delays
    assert (run / "report.html").exists() and "report:" in r.stdout


def test_the_lab_is_gone_after_the_run(janus_run):
    assert not Path("/run/netns/sfube-sfu").exists() and not Path("/run/netns/sfube-cli").exists()


def test_ctrl_c_tears_everything_down_and_keeps_what_was_collected(tmp_path):
    import signal
    import time

    import psutil

    started = time.time()
    cmd = [sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--rooms", "1",
           "--out", str(tmp_path), "--lab-prefix", "sfubi", "--lab-subnet", "127.0.7"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "r1u3 joining" in line:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + rest
    assert not Path("/run/netns/sfubi-sfu").exists() and not Path("/run/netns/sfubi-cli").exists()
    run = next(p for p in tmp_path.iterdir() if p.is_dir())
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    events = read(run, "events")
    assert events[-1]["event"] == "run_finished" and events[-1]["status"] == "interrupted"
    assert events[-1]["participants"] >= 3
    leftovers = []
    for p in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if p.info["create_time"] >= started and (str(run) in cmdline or "sfubench-grid-" in cmdline):
            leftovers.append(cmdline[:120])
    assert not leftovers


def test_the_real_run_report_renders_every_plot_and_table(janus_run):
    from reports import run as run_report
    from reports.verify import check_rendered

    run, _ = janus_run
    problems = check_rendered(run / "report.html", expect=run_report.FIGURES,
                              screenshot=run / "report.png")
    assert not problems, problems
    assert (run / "report.png").stat().st_size > 50_000


def test_the_run_is_in_the_results_database(janus_run):
    from reports import history

    run, _ = janus_run
    series = history.trend("janus", run.parent / "results.sqlite")
    assert series and all(points[-1]["run"] == run.name for points in series.values())
