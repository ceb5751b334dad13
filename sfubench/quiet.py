"""A quiet machine before a run. A study runs its loadtests one after another on the same cores, and
a run that starts while the last one is still going (its browsers and grid exiting, its memory
being given back) measures that, not its SFU: two runs of a study started right after a heavy one
were client-bound at their first count. So before each run the study waits until what the run before
it left is gone (processes of its session, of the lab's cgroups, the lab's network namespaces) and
the lab's CPUs have been idle for a few seconds in a row; at most a bound, after which the run goes
ahead and its record says the machine was not quiet."""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import cgroups

IDLE_SHARE = 0.15   # the busiest of the lab's CPUs below this share counts as idle...
IDLE_S = 3.0        # ...for this long in a row
BOUND_S = 120.0     # the longest a run waits for it
POLL_S = 0.5


@dataclass(frozen=True)
class Quiet:
    seconds: float        # how long it took
    quiet: bool           # False: the bound passed first
    why: str              # what was waited for, or what was still there at the bound

    def record(self) -> dict:
        return {"waited_s": round(self.seconds, 1), "quiet": self.quiet, "why": self.why}


def session_pids(session: int) -> list[int]:
    """The processes of session `session` (a run is started in a session of its own)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            # the session is the 6th field; the command (2nd) may hold spaces, so count from ')'
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session and int(entry.name) != session:
            out.append(int(entry.name))
    return out


def leftovers(prefix: str, session: int | None = None) -> list[str]:
    """What a run of lab `prefix` (in session `session`) left: processes, namespaces, cgroups."""
    out = []
    if session is not None and (pids := session_pids(session)):
        out.append(f"the last run's processes {' '.join(map(str, pids[:5]))}")
    for ns in (f"{prefix}-sfu", f"{prefix}-cli", f"{prefix}-net"):
        if Path("/run/netns", ns).exists():
            out.append(f"network namespace {ns}")
    if cgroups.version() is not None:
        for role in ("sfu", "clients"):
            if pids := cgroups.CpuGroup(f"{prefix}-{role}").pids():
                out.append(f"{role} processes {' '.join(map(str, pids[:5]))} of cgroup {prefix}-{role}")
    return out


def cpu_times(cpus: list[int]) -> dict[int, tuple[int, int]]:
    """cpu -> (busy, total) jiffies since boot, from /proc/stat."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            ticks = [int(v) for v in values[:8]]
            idle = ticks[3] + ticks[4]   # idle, iowait
            out[int(name[3:])] = (sum(ticks) - idle, sum(ticks))
    return out


def busiest(before: dict, after: dict) -> float:
    """The largest busy share of any CPU between two cpu_times() readings."""
    shares = [(after[c][0] - before[c][0]) / max(1, after[c][1] - before[c][1]) for c in before if c in after]
    return max(shares, default=0.0)


def wait(prefix: str, cpus: list[int], session: int | None = None, say: Callable[[str], None] = print,
         bound: float = BOUND_S, clock: Callable[[], float] = time.monotonic) -> Quiet:
    """Waits until lab `prefix` has nothing left of a run (`session`: that run's) and `cpus` have
    been idle for IDLE_S, or `bound` seconds have passed; says what it waits for as that changes."""
    start, idle_since, said, waited = clock(), None, None, []
    reading = cpu_times(cpus)
    while True:
        time.sleep(POLL_S)
        now, fresh = clock(), cpu_times(cpus)
        busy, reading = busiest(reading, fresh), fresh
        left = leftovers(prefix, session)
        if not left and busy < IDLE_SHARE:
            idle_since = now if idle_since is None else idle_since
            if now - idle_since >= IDLE_S:
                return Quiet(now - start, True, "; ".join(waited) or "nothing")
            continue
        idle_since = None
        why = "; ".join(left) if left else f"the lab's CPUs busy (up to {busy:.0%})"
        if (left or "busy") != said:   # said once per thing waited for, not at every poll
            said = left or "busy"
            waited.append(why)
            say(f"waiting for a quiet machine: {why}")
        if now - start >= bound:
            return Quiet(now - start, False, why)
