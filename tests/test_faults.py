"""Faults injected for real into real runs: the SFU killed, hung (SIGSTOP) or never healthy, a
browser killed or frozen, the grid's node lost, the synthetic participants' generator killed, the
grid or the Pushgateway unreachable, the run folder's disk full, the runner's clock stepped, Ctrl-C
during scoring and twice during the teardown. Each run must end with the right exit status and a
one-line reason, keep every record it had written, build what report it can, and leave no process,
namespace or cgroup behind. The faults new with the reliability issue run with the clients confined
to a CPU quota (QUOTA), as a study's are. `make test` kills the SFU, steps the clock, presses Ctrl-C
twice and points at no grid; `make test-e2e` injects every other fault."""
import html
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from reports import metrics, runfiles
from sfubench import cgroups
from sfubench.grid import free_port
from sfubench.rundir import read

from support.interrupt import as_a_terminal_starts_it
from support.tiers import full

ROOT = Path(__file__).resolve().parent.parent
PREFIX, SUBNET = "sfubf", "127.0.4"
QUOTA = ("--client-cpus", "1.2")

pytestmark = pytest.mark.e2e


def command(out: Path, *args: str, preset: str = "browsers") -> list[str]:
    return [sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--preset", preset, "--out", str(out),
            "--lab-prefix", PREFIX, "--lab-subnet", SUBNET, "--quality-frames", "0", "--audio-seconds", "0", *args]


class Run:
    """A loadtest in the background whose output is read line by line."""

    def __init__(self, out: Path, *args: str, preset: str = "browsers", env: dict | None = None):
        self.out = out
        self.started = time.time()
        self.proc = subprocess.Popen(command(out, *args, preset=preset), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=ROOT, preexec_fn=as_a_terminal_starts_it,
                                     env={**os.environ, **(env or {})})
        self.lines: list[str] = []

    def until(self, text: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            self.lines.append(line)
            if text in line:
                return line
            assert time.monotonic() < deadline, f"no {text!r} within {timeout} s:\n{''.join(self.lines)}"
        raise AssertionError(f"the run ended before {text!r}:\n{''.join(self.lines)}")

    def finish(self, timeout: float = 300) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, "".join(self.lines) + out, err

    @property
    def folder(self) -> Path:
        (path,) = [p for p in self.out.iterdir() if p.is_dir() and p.name[0].isdigit()]
        return path


def group_pids(role: str) -> list[int]:
    return cgroups.CpuGroup(f"{PREFIX}-{role}").pids()


def browsers() -> list[psutil.Process]:
    out = []
    for pid in group_pids("clients"):
        try:
            p = psutil.Process(pid)
            if "chrom" in p.name():
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def assert_nothing_left(run: Run):
    assert not [n for n in (f"{PREFIX}-sfu", f"{PREFIX}-cli") if Path("/run/netns", n).exists()]
    assert not group_pids("sfu") and not group_pids("clients")
    assert not [d for d in Path("/sys/fs/cgroup/cpu/sfubench").glob(f"{PREFIX}-*")] \
        if Path("/sys/fs/cgroup/cpu/sfubench").exists() else True
    mine = []
    for p in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if p.info["create_time"] >= run.started and ("sfubench-grid-" in cmdline or str(run.out) in cmdline):
            mine.append(cmdline[:100])
    assert not mine


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_sfu_killed_mid_ramp_fails_the_run_and_keeps_everything(tmp_path):
    run = Run(tmp_path, "--rooms", "3", "--background-interval", "1")
    run.until("r2u1 joining")
    samples = run.folder / "samples.jsonl"
    before = samples.read_text().count("\n")
    assert before > 0
    (pid,) = group_pids("sfu")
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    code, out, err = run.finish()
    assert code == 1, out + err
    assert "janus exited with signal 9 (SIGKILL) during the run" in one_line(err)
    folder = run.folder
    events = read(folder, "events")
    (exited,) = [e for e in events if e["event"] == "sfu_exited"]
    assert exited["code"] == -9 and exited["log"] and exited["t"] / 1000 - killed < 5   # noticed at once
    names = [e["event"] for e in events]
    assert "room_started" in names and not any(e["event"] == "room_started" and e["room"] == 3 for e in events)
    assert "target_reached" not in names and names[-1] == "run_finished" and events[-1]["status"] == "failed"
    assert samples.read_text().count("\n") >= before
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["status"] == "failed" and "janus exited" in meta["error"]
    assert (folder / "report.html").exists() and "sfu_exited" in (folder / "events.jsonl").read_text()
    assert_nothing_left(run)
    # The crashed run's folder alone rebuilds its report.
    (folder / "report.html").unlink()
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "report", str(folder)], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and (folder / "report.html").exists(), r.stderr
    assert "janus exited" in (folder / "report.html").read_text()


@full
def test_a_killed_browser_fails_its_participants_and_the_run_goes_on(tmp_path):
    run = Run(tmp_path, "--target-samples", "24")
    run.until("ramp: ")
    for p in browsers():
        p.kill()
    code, out, err = run.finish()
    assert code == 0, out + err
    failed = [e for e in read(run.folder, "events") if e["event"] == "participant_failed"]
    assert {e["user"] for e in failed} == {f"r1u{i}" for i in range(1, 6)}, failed
    assert all("stopped reporting" in e["reason"] or "stopped answering" in e["reason"] for e in failed)
    tables = json.loads((run.folder / "tables.json").read_text())
    assert tables["headline"]["target_client_bound"] is True
    assert tables["headline"]["stream_failure_rate"] > 0.5
    assert_nothing_left(run)


@full
def test_a_frozen_browser_aborts_the_run_when_asked(tmp_path):
    run = Run(tmp_path, "--target-samples", "40", "--on-client-failure", "abort")
    run.until("ramp: ")
    frozen = browsers()
    for p in frozen:
        p.suspend()
    code, out, err = run.finish()
    assert code == 1, out + err
    assert "--on-client-failure is abort" in one_line(err) and "stopped reporting" in err
    assert json.loads((run.folder / "meta.json").read_text())["status"] == "failed"
    assert_nothing_left(run)


def test_an_unreachable_grid_is_one_line_and_leaves_nothing(tmp_path):
    run = Run(tmp_path, "--grid-url", "http://127.0.0.1:9")
    code, out, err = run.finish()
    assert code == 1
    assert one_line(err).startswith("sfubench: error: no Selenium Grid answers at http://127.0.0.1:9")
    assert json.loads((run.folder / "meta.json").read_text())["status"] == "failed"
    assert_nothing_left(run)


@full
def test_a_full_disk_stops_the_run_with_a_clear_reason(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], check=True)
    try:
        run = Run(disk, "--rooms", "2", "--background-interval", "1")
        code, out, err = run.finish()
        assert code == 1, out + err
        assert "No space left on device" in one_line(err) and str(disk) in err
        assert_nothing_left(run)
        # What was written stays readable: at worst a cut-off last line, which readers skip.
        assert read(run.folder, "events")
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@full
def test_an_unreachable_pushgateway_is_reported_and_the_run_completes(tmp_path):
    port = free_port()
    run = Run(tmp_path, "--pushgateway", f"http://127.0.0.1:{port}")
    code, out, err = run.finish()
    assert code == 0, out + err
    assert f"pushgateway: live samples stopped: http://127.0.0.1:{port}" in out
    assert_nothing_left(run)


@full
def test_ctrl_c_during_scoring_still_builds_the_report(tmp_path):
    run = Run(tmp_path, "--quality-frames", "2")
    run.until("quality: scoring")
    run.proc.send_signal(signal.SIGINT)
    code, out, err = run.finish()
    assert code == 130, out + err
    assert "scoring interrupted" in out
    meta = json.loads((run.folder / "meta.json").read_text())
    assert meta["status"] == "interrupted" and (run.folder / "report.html").exists()
    assert (run.folder / "frames" / "index.jsonl").exists() and not (run.folder / "quality.jsonl").exists()
    assert_nothing_left(run)


@full
def test_a_dropped_session_sighup_cleans_up_as_ctrl_c_does(tmp_path):
    """The SSH session a run was started from goes away: the engine gets SIGHUP, tears the lab down
    (SFU, browsers, namespaces, groups), keeps the run with its report, and says it was interrupted."""
    run = Run(tmp_path)
    run.until("r1u3 joining")
    run.proc.send_signal(signal.SIGHUP)
    code, out, err = run.finish()
    assert code == 130, out + err
    assert json.loads((run.folder / "meta.json").read_text())["status"] == "interrupted"
    assert (run.folder / "report.html").exists()
    assert_nothing_left(run)


def test_a_loadtest_engine_killed_by_sigkill_leaves_nothing_and_its_run_abandoned(tmp_path):
    """SIGKILL (the OOM killer, a CI timeout) gives the engine no teardown at all: its reaper sees
    the engine gone and removes the SFU, the browsers, the namespaces and the groups; the run folder
    keeps every sample written before, and meta.json says `abandoned`."""
    run = Run(tmp_path, "--rooms", "2", "--background-interval", "1")
    run.until("r2u1 joining")
    before = (run.folder / "samples.jsonl").read_text()
    assert before and json.loads((run.folder / "meta.json").read_text())["status"] == "running"
    run.proc.send_signal(signal.SIGKILL)
    code, _, _ = run.finish()
    assert code == -signal.SIGKILL
    deadline = time.monotonic() + 15
    while True:
        try:
            assert_nothing_left(run)
            assert json.loads((run.folder / "meta.json").read_text())["status"] == "abandoned"
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert (run.folder / "samples.jsonl").read_text().startswith(before)
    assert "reaper: reclaimed sfubf" in (run.folder / "reaper.log").read_text()


def test_a_second_ctrl_c_stops_at_once_and_says_what_is_left(tmp_path):
    run = Run(tmp_path)
    run.until("r1u3 joining")
    run.proc.send_signal(signal.SIGINT)
    run.until("interrupted: cleaning up")
    run.proc.send_signal(signal.SIGINT)
    code, out, err = run.finish()
    assert code == 130, out + err
    line = one_line(err)
    assert line.startswith("sfubench: interrupted again: stopping now; ")
    if "nothing left behind" not in line:
        # What it names is really there; clear it for the tests that follow.
        if "network namespaces" in line:
            assert Path("/run/netns", f"{PREFIX}-sfu").exists() or Path("/run/netns", f"{PREFIX}-cli").exists()
            for ns in (f"{PREFIX}-sfu", f"{PREFIX}-cli"):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for role in ("sfu", "clients"):
            cgroups.CpuGroup(f"{PREFIX}-{role}").remove()
    # the lab's reaper (sfubench/reaper.py) removes the rest as soon as the engine is gone: it may
    # still be ending the browsers, or not yet have said what it reclaimed, a moment after the
    # engine exits
    deadline = time.monotonic() + 10
    while True:
        try:
            assert_nothing_left(run)
            assert "reaper: reclaimed" in (run.folder / "reaper.log").read_text()
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def kept_and_reported(run: Run, samples_before: int, status: str = "failed") -> list[dict]:
    """What every fault must leave: the samples written before it, the report, the status in
    meta.json, the last event run_finished; returns the events."""
    folder = run.folder
    assert (folder / "samples.jsonl").read_text().count("\n") >= samples_before
    assert json.loads((folder / "meta.json").read_text())["status"] == status
    assert (folder / "report.html").exists()
    events = read(folder, "events")
    assert events[-1]["event"] == "run_finished" and events[-1]["status"] == status
    return events


def samples_so_far(run: Run) -> int:
    n = (run.folder / "samples.jsonl").read_text().count("\n")
    assert n > 0
    return n


@full
def test_a_hung_sfu_fails_the_run_on_its_health_check_and_keeps_everything(tmp_path):
    run = Run(tmp_path, "--rooms", "3", "--background-interval", "1", *QUOTA)
    run.until("r2u1 joining")
    before = samples_so_far(run)
    (pid,) = group_pids("sfu")
    os.kill(pid, signal.SIGSTOP)   # alive, holding its ports, answering nothing
    code, out, err = run.finish()
    assert code == 1, out + err
    assert "janus stopped answering its health check" in one_line(err)
    events = kept_and_reported(run, before)
    (hung,) = [e for e in events if e["event"] == "sfu_exited"]
    assert hung["code"] is None and "stopped answering" in hung["reason"]
    assert not any(e["event"] == "room_started" and e["room"] == 3 for e in events)
    assert_nothing_left(run)   # the stopped process was killed with its group


@full
def test_an_sfu_that_never_becomes_healthy_is_one_line_and_leaves_nothing(tmp_path):
    """The SFU's process starts and is stopped at once (SIGSTOP, before it can open a port): the
    engine waits its health check's time, then says so; no room is started."""
    run = Run(tmp_path, *QUOTA)
    stopped = set()
    deadline = time.monotonic() + 120
    while not stopped and run.proc.poll() is None and time.monotonic() < deadline:
        for pid in group_pids("sfu"):
            os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
        time.sleep(0.002)
    assert stopped, "the SFU never started"
    code, out, err = run.finish()
    assert code == 1, out + err
    line = one_line(err)
    assert "janus not healthy at" in line and "after 30 s" in line, line
    events = read(run.folder, "events")
    assert [e["event"] for e in events] == ["run_started", "sfu_not_started", "run_finished"], events
    assert "not healthy" in events[1]["reason"] and events[-1]["status"] == "failed"
    assert (run.folder / "report.html").exists()
    assert_nothing_left(run)


@full
def test_a_lost_grid_node_fails_its_browsers_and_the_run_says_why(tmp_path):
    """The grid's node goes away mid-ramp with its browsers (its Java process, its drivers and
    browsers killed): the pages fall silent, the next room cannot open a session, and the run
    stops with the grid named as the cause."""
    run = Run(tmp_path, "--rooms", "3", *QUOTA)
    run.until("r2u1 joining")
    before = samples_so_far(run)
    for pid in group_pids("clients"):
        try:
            p = psutil.Process(pid)
            if p.name() in ("java", "chromedriver") or "chrom" in p.name():
                p.kill()
        except psutil.NoSuchProcess:
            pass
    code, out, err = run.finish()
    assert code == 1, out + err
    line = one_line(err)
    assert "grid" in line.lower(), line
    events = kept_and_reported(run, before)
    failed = {e["user"] for e in events if e["event"] == "participant_failed"}
    assert {"r1u1", "r1u2", "r1u3", "r1u4", "r1u5"} <= failed, events
    assert_nothing_left(run)


@full
def test_a_generator_that_dies_fails_its_participants_with_the_reason(tmp_path):
    """The default scenario (a browser in room 1, synthetic participants for the rest): the
    generator killed mid-ramp fails every participant it carried, with why, and the run stops
    rather than take their silence for the SFU's knee."""
    run = Run(tmp_path, "--shape", "ramp", "--rooms", "3", "--client-cpus", "0.9", "--background-interval", "1",
              preset="study")
    run.until("r2u1 joining")
    before = samples_so_far(run)
    (synth,) = [p for p in map(psutil.Process, group_pids("clients")) if p.name().startswith("sfubench-synth")]
    synth.kill()
    code, out, err = run.finish()
    assert code == 1, out + err
    line = one_line(err)
    assert "synthetic participants' process exited with status -9" in line, line
    events = kept_and_reported(run, before)
    failed = [e for e in events if e["event"] == "participant_failed"]
    assert failed and all("exited with status -9" in e["reason"] for e in failed), failed
    assert "r1u1" not in {e["user"] for e in failed}   # the browser was not the generator's
    assert_nothing_left(run)


def test_a_clock_step_costs_the_window_it_touched_not_the_run(tmp_path):
    """The machine's wall clock stepped two minutes forward inside a measurement window (as an NTP
    step would; put back as soon as the run has seen it, another step): the window is discarded and
    measured again, the run completes, and its report leaves the window out and says so. A browser
    and a synthetic participant a room: four browsers left the clients' quota short on a VM whose
    timers wake late (client-bound at 4), a knee this test rightly refuses."""
    run = Run(tmp_path, "--rooms", "2", "--users-per-room", "2", "--real-per-room", "1", "--ramp-samples", "6",
              "--background-interval", "1", *QUOTA)
    run.until("r2u2 joining")
    samples = run.folder / "samples.jsonl"
    deadline = time.monotonic() + 120
    while not any('"phase":"ramp"' in line and '"participants":4' in line for line in samples.read_text().splitlines()):
        assert time.monotonic() < deadline, "room 2 was never measured"
        time.sleep(0.1)
    wall, mono = time.time(), time.monotonic()
    time.clock_settime(time.CLOCK_REALTIME, wall + 120)
    try:
        deadline = time.monotonic() + 30
        while "clock_stepped" not in (run.folder / "events.jsonl").read_text():
            assert time.monotonic() < deadline, "the step went unnoticed"
            time.sleep(0.1)
    finally:
        time.clock_settime(time.CLOCK_REALTIME, wall + time.monotonic() - mono)
    code, out, err = run.finish()
    assert code == 0, out + err
    events = kept_and_reported(run, 1, status="ok")
    steps = [e["seconds"] for e in events if e["event"] == "clock_stepped"]
    assert len(steps) == 2 and 119 < steps[0] < 121 and -121 < steps[1] < -119, steps   # forward, then back
    ramp = [w for w in read(run.folder, "windows") if w["phase"] == "ramp" and w["participants"] == 4]
    assert [bool(w.get("discarded")) for w in ramp][-1] is False and any(w.get("discarded") for w in ramp), ramp
    assert "the wall clock stepped +120.0 s" in out and "discarded and measured again" in out
    a = metrics.analyse(runfiles.load(run.folder))
    kept = {w["window"] for w in ramp if not w.get("discarded")}
    assert {o["window"] for o in a.obs if o["phase"] == "ramp" and o["participants"] == 4} == kept
    assert a.knee.participants is None, a.knee   # the step made no knee
    assert "was left out (the runner's wall clock stepped" in html.unescape((run.folder / "report.html").read_text())
    assert_nothing_left(run)


@full
def test_a_partition_shows_as_loss_then_recovery_not_as_a_knee(tmp_path):
    """About 10 s with every packet between the clients and the SFU lost (the partition profile,
    settled on and measured for one window), then the run's own network back: the report shows the
    link's loss and how long the videos took to play again, and names no knee. The run's token,
    given here, is nowhere in the run folder."""
    token = secrets.token_urlsafe(16)
    run = Run(tmp_path, "--users-per-room", "3", "--network", "lan", "--shape", "degrade", "--degrade", "partition",
              "--network-samples", "5", "--target-samples", "5", *QUOTA, env={"SFUBENCH_RUN_TOKEN": token})
    code, out, err = run.finish()
    assert code == 0, out + err
    events = read(run.folder, "events")
    assert [e["network"] for e in events if e["event"] == "network_changed"] == ["partition", "lan"]
    (back,) = [e for e in events if e["event"] == "network_recovered"]
    assert back["network"] == "partition" and back["videos"] == back["recovered"] == 6, back
    assert 0 < back["seconds"] < 15, back
    tables = json.loads((run.folder / "tables.json").read_text())
    network = tables["tables"]["network"]
    rows = {r[0]: dict(zip(network["columns"], r)) for r in network["rows"]}
    cut = rows["partition"]
    assert cut["Link loss (%)"] == 100.0 and cut["Recv video per stream (Mbps)"] < 0.01, cut
    assert float(cut["Playing again after (s)"]) == pytest.approx(back["seconds"], abs=0.06)
    assert rows["lan"]["Link loss (%)"] == 0.0 and rows["lan"]["Recv video per stream (Mbps)"] > 0.1, rows
    assert tables["knee"]["participants"] is None, tables["knee"]
    assert "Playing again after" in (run.folder / "report.html").read_text()
    assert not [p for p in run.folder.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert_nothing_left(run)


@full
def test_a_second_run_on_a_busy_lab_is_refused_and_leaves_the_first_alone(tmp_path):
    """Started by mistake on the lab another run holds: one line, exit 1, and the first run's
    namespaces, groups and processes untouched (it completes as if alone)."""
    first = Run(tmp_path / "first", "--target-samples", "6", *QUOTA)
    first.until("r1u3 joining")
    second = Run(tmp_path / "second", *QUOTA)
    code, out, err = second.finish()
    assert code == 1, out + err
    assert "another sfubench run" in one_line(err) and "is using the lab 'sfubf'" in err
    assert Path("/run/netns", f"{PREFIX}-sfu").exists() and group_pids("sfu")
    code, out, err = first.finish()
    assert code == 0, out + err
    assert_nothing_left(first)


@full
@pytest.mark.parametrize("kept", [True, False])
def test_browser_sessions_outlive_the_grids_idle_timeout(tmp_path, monkeypatch, kept):
    """A grid ends a session no WebDriver call has touched for its session timeout, while joined
    pages talk to the engine over HTTP only: an hour's soak lost its browser so. Here the grid's
    timeout is 20 s (Selenium checks every 30 s) and the hold lasts 100 s: with the runner's
    keepalive (every 5 s here) the browsers stay; without it (the control) they are cut."""
    import functools
    from sfubench import browsers, config, grid, loadtest, sites
    from sfubench.progress import Progress
    monkeypatch.setattr(sites.grid_mod, "LocalGrid", functools.partial(grid.LocalGrid, session_timeout=20))
    monkeypatch.setattr(browsers, "KEEP_S", 5.0 if kept else 1e9)
    cfg = config.load(cli={"sfu": "janus", "preset": "browsers", "out": str(tmp_path), "lab_prefix": PREFIX,
                           "lab_subnet": SUBNET, "results_db": str(tmp_path / "results.sqlite"), "quality_frames": 0,
                           "users_per_room": 2, "shape": "steady", "rooms": 1, "steady_minutes": 100 / 60,
                           "client_cpus": 1.2}, env={})
    run_dir, status = loadtest.run(cfg, Progress(open(os.devnull, "w")))
    assert status == "ok"
    assert "session-timeout = 20" in (run_dir / "grid" / "grid.toml").read_text()
    failed = [e for e in read(run_dir, "events") if e["event"] == "participant_failed"]
    cut = "session timed out due to inactivity" in (run_dir / "grid" / "grid.log").read_text()
    if kept:
        assert not failed and not cut, failed
    else:
        assert cut and failed and all("stopped reporting" in e["reason"] for e in failed), failed
