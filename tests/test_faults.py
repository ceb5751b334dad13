"""Faults injected for real into real runs: the SFU killed, a browser killed or frozen, the grid or
the Pushgateway unreachable, the run folder's disk full, Ctrl-C during scoring and twice during the
teardown. Each run must end with the right exit status and a one-line reason, keep every record it
had written, build what report it can, and leave no process, namespace or cgroup behind."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sfubench import cgroups
from sfubench.grid import free_port
from sfubench.rundir import read

from interrupt import as_a_terminal_starts_it

ROOT = Path(__file__).resolve().parent.parent
PREFIX, SUBNET = "sfubf", "127.0.4"

pytestmark = pytest.mark.e2e


def command(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--preset", "browsers", "--out", str(out),
            "--lab-prefix", PREFIX, "--lab-subnet", SUBNET, "--quality-frames", "0", *args]


class Run:
    """A loadtest in the background whose output is read line by line."""

    def __init__(self, out: Path, *args: str):
        self.out = out
        self.started = time.time()
        self.proc = subprocess.Popen(command(out, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=ROOT, preexec_fn=as_a_terminal_starts_it)
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


def test_an_unreachable_pushgateway_is_reported_and_the_run_completes(tmp_path):
    port = free_port()
    run = Run(tmp_path, "--pushgateway", f"http://127.0.0.1:{port}")
    code, out, err = run.finish()
    assert code == 0, out + err
    assert f"pushgateway: live samples stopped: http://127.0.0.1:{port}" in out
    assert_nothing_left(run)


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
    time.sleep(1)
    assert_nothing_left(run)
