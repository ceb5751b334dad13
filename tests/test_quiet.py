"""The quiet machine a study waits for before each run (sfubench/quiet.py), with real processes: one
left in the lab's cgroup, one of the last run's session, a CPU kept busy. Each delays the wait until
it is gone; one that never goes ends it at its bound, said as not quiet."""
import os
import subprocess
import time

from sfubench import quiet
from sfubench.cgroups import CpuGroup

PREFIX = "sfubqt"
CPUS = list(range(os.cpu_count() or 1))


def timed(**kw) -> tuple[quiet.Quiet, float, list[str]]:
    said: list[str] = []
    start = time.monotonic()
    q = quiet.wait(PREFIX, CPUS, say=said.append, **kw)
    return q, time.monotonic() - start, said


def test_a_process_left_in_the_labs_cgroup_delays_the_wait_until_it_is_gone():
    group = CpuGroup(f"{PREFIX}-clients").create()
    try:
        left = subprocess.Popen(group.wrap(["sleep", "4"]))
        time.sleep(0.3)
        assert left.pid in group.pids()
        q, took, said = timed(bound=60)
        assert left.poll() is not None, "the wait ended before the process did"
        assert q.quiet and took >= 4 + quiet.IDLE_S - 0.5, (q, took)
        assert said and f"clients processes {left.pid} of cgroup {PREFIX}-clients" in said[0], said
        assert f"{PREFIX}-clients" in q.why
    finally:
        group.remove()


def test_the_last_runs_session_and_a_busy_cpu_are_waited_for_then_the_bound_ends_it():
    # a process of the last run's session (started in a session of its own, as the study starts runs)
    run = subprocess.Popen(["sh", "-c", "sleep 3 & sleep 0.2"], start_new_session=True)
    run.wait()
    q, took, said = timed(session=run.pid, bound=60)
    assert q.quiet and took >= 2.5 + quiet.IDLE_S and "the last run's processes" in said[0], (q, took, said)
    # a CPU kept busy: never quiet, so the bound ends the wait and says why
    busy = subprocess.Popen(["python3", "-c", "while True: pass"])
    try:
        q, took, said = timed(bound=4)
        assert not q.quiet and 4 <= took < 8 and "busy" in q.why, (q, took, said)
    finally:
        busy.kill()
    q, took, _ = timed(bound=30)
    assert q.quiet and took < quiet.IDLE_S + 5, (q, took)   # an idle machine: the idle seconds, no more
