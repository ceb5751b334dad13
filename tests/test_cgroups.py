"""CPU control groups for real (needs root, as runs do): a busy process confined by a quota uses what
the quota allows and no more, its CPU is counted exactly, and removing the group ends it."""
import os
import secrets
import shutil
import subprocess
import sys
import time

import psutil
import pytest

from sfubench import cgroups
from sfubench.agent import TOKEN_ENV
from sfubench.cgroups import CpuGroup
from sfubench.probes import GroupProbe, MachineProbe, RemoteProbe

BUSY = ["python3", "-c", "while True: pass"]


@pytest.fixture
def group():
    g = CpuGroup("sfubench-test", cores=0.25).create()
    yield g
    g.remove()


def test_this_host_has_a_cpu_controller():
    assert cgroups.version() in (1, 2)


def test_a_quota_caps_a_busy_process_and_its_cpu_is_counted(group):
    proc = subprocess.Popen(group.wrap(BUSY))
    try:
        time.sleep(0.5)
        assert proc.pid in group.pids()
        probe = GroupProbe("clients", group)
        first = probe.sample(phase="x", window=1, edge="start")
        time.sleep(3)
        second = probe.sample(phase="x", window=1, edge="end")
    finally:
        proc.kill()
        proc.wait()
    cores = (second["cpu_s"] - first["cpu_s"]) / ((second["t"] - first["t"]) / 1000)
    assert 0.18 < cores < 0.3, cores                  # the quota, not the core the loop would take
    assert second["cores"] == 0.25
    throttled = (second["throttled_s"] - first["throttled_s"]) / ((second["t"] - first["t"]) / 1000)
    assert throttled > 0.5, throttled                 # held back most of the time
    periods = second["periods"] - first["periods"]
    assert 0.5 < (second["throttled_periods"] - first["throttled_periods"]) / periods <= 1, (first, second)


@pytest.mark.parametrize("cores, period_ms", [(0.2, 10), (0.02, 50)])
def test_the_cfs_period_is_the_one_asked_for_unless_the_quota_would_fall_under_a_millisecond(cores, period_ms):
    """A short period keeps a throttled SFU's stalls short; the kernel's smallest quota is 1 ms, so
    a tiny budget gets a longer period rather than a larger share."""
    g = CpuGroup("sfubench-test-period", cores=cores, period_us=10_000).create()
    proc = subprocess.Popen(g.wrap(BUSY))
    try:
        cpu = g._dirs()["cpu"]
        if g.version == 1:
            period, quota = int((cpu / "cpu.cfs_period_us").read_text()), int((cpu / "cpu.cfs_quota_us").read_text())
        else:
            quota, period = map(int, (cpu / "cpu.max").read_text().split())
        assert (period, quota) == (period_ms * 1000, round(cores * period_ms * 1000))
        assert g.describe()["period_ms"] == period_ms
        probe = GroupProbe("sfu", g)
        time.sleep(0.3)
        first = probe.sample()
        time.sleep(2)
        second = probe.sample()
    finally:
        proc.kill()
        proc.wait()
        g.remove()
    span = (second["t"] - first["t"]) / 1000
    assert (second["periods"] - first["periods"]) / span == pytest.approx(1000 / period_ms, rel=0.15)
    assert cores * 0.7 < (second["cpu_s"] - first["cpu_s"]) / span < cores * 1.3


def test_a_nodes_agent_reports_its_own_groups_quota_cpu_and_throttling(group, tmp_path):
    """sfubench/agent.py as a grid node runs it: copied alone (the standard library only), started
    inside the node's group beside a busy browser stand-in, read by the engine's remote probe."""
    agent = tmp_path / "agent.py"
    shutil.copy(cgroups.__file__.replace("cgroups.py", "agent.py"), agent)
    port, token = 19470, secrets.token_urlsafe(16)
    server = subprocess.Popen(group.wrap([sys.executable, "-I", "-S", str(agent), "--address", "127.0.0.1",
                                          "--port", str(port)]), stdout=subprocess.PIPE, text=True,
                              env={**os.environ, TOKEN_ENV: token})
    busy = subprocess.Popen(group.wrap(BUSY))
    try:
        assert "probe at" in server.stdout.readline()
        probe = RemoteProbe("clients", f"http://127.0.0.1:{port}/probe", token=token)
        first = probe.sample(edge="start")
        time.sleep(3)
        second = probe.sample(edge="end")
    finally:
        for p in (busy, server):
            p.kill()
            p.wait()
    span = (second["t"] - first["t"]) / 1000
    assert second["cores"] == 0.25 and second["hosts"] == 1
    assert 0.18 < (second["cpu_s"] - first["cpu_s"]) / span < 0.3, (first, second)
    assert (second["throttled_s"] - first["throttled_s"]) / span > 0.5, (first, second)
    assert second["rss"] > 0 and "udp_in" in second


def test_children_stay_in_the_group_and_removal_ends_them(group):
    parent = subprocess.Popen(group.wrap(["sh", "-c", "sleep 300 & sleep 300 & wait"]))
    time.sleep(0.5)
    pids = group.pids()
    assert len(pids) == 3
    group.remove()
    parent.wait(5)
    # its own processes only: any other `sleep 300` on the machine is none of this test's business
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive


def test_a_pinned_group_runs_on_its_cpus_only():
    g = CpuGroup("sfubench-test-pin", cpus="0").create()
    try:
        proc = subprocess.Popen(g.wrap(["python3", "-c", "import os, time; time.sleep(0.3); "
                                        "print(sorted(os.sched_getaffinity(0)))"]),
                                stdout=subprocess.PIPE, text=True)
        assert proc.communicate(timeout=10)[0].strip() == "[0]"
        assert g.describe() == {"cgroup": f"v{g.version}:sfubench/sfubench-test-pin", "cores": None, "cpus": "0",
                                "period_ms": None}
    finally:
        g.remove()


REALTIME = ["python3", "-c", "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)); print('fifo')"]


@pytest.mark.parametrize("share", [0.0, cgroups.REALTIME_SHARE])
def test_a_group_lent_a_realtime_share_lets_its_threads_run_realtime(share):
    """The generator's pacers ask for SCHED_FIFO; where the kernel schedules real-time threads by
    group (v1 with RT_GROUP_SCHED), a group runs none until it is lent a share."""
    g = CpuGroup("sfubench-test-rt", realtime=share).create()
    try:
        by_group = (cgroups.ROOT / "cpu" / cgroups.PARENT / g.name / "cpu.rt_runtime_us").exists()
        proc = subprocess.run(g.wrap(REALTIME), capture_output=True, text=True, timeout=10)
        assert (proc.stdout.strip() == "fifo") == (share > 0 or not by_group), proc.stderr
        if by_group and share:
            d = cgroups.ROOT / "cpu" / cgroups.PARENT
            assert int((d / g.name / "cpu.rt_runtime_us").read_text()) == round(share * 1_000_000)
            assert int((d / "cpu.rt_runtime_us").read_text()) >= round(share * 1_000_000)
    finally:
        g.remove()


def test_a_capped_group_is_lent_no_realtime_share():
    """A CFS quota holds normal threads only: real-time ones in a capped group would run past the
    cap (clients capped to stand for a slower machine would not be)."""
    g = CpuGroup("sfubench-test-rtcap", cores=0.5, realtime=cgroups.REALTIME_SHARE).create()
    try:
        by_group = (cgroups.ROOT / "cpu" / cgroups.PARENT / g.name / "cpu.rt_runtime_us").exists()
        proc = subprocess.run(g.wrap(REALTIME), capture_output=True, text=True, timeout=10)
        assert (proc.stdout.strip() == "fifo") == (not by_group), proc.stderr
    finally:
        g.remove()


def test_the_machine_probe_counts_every_core():
    probe = MachineProbe()
    probe.sample()   # the first row: the next one's `cpu` is since this
    procs = [subprocess.Popen(BUSY) for _ in range(2)]
    try:
        time.sleep(2)
        b = probe.sample()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert b["cores"] == psutil.cpu_count()
    assert b["cpu"] > 0.8 * min(2, psutil.cpu_count())
