"""CPU control groups for the lab's roles (the SFU; the clients: grid and browsers), so each role's
CPU is counted exactly, whatever processes it forks, and can be capped (a CFS quota, in cores) or
pinned (a cpuset). cgroup v2 where the host has its cpu controller there, else the v1 `cpu`,
`cpuacct` and `cpuset` hierarchies (Debian 12 kernels booted with v1 mount those).

A process joins its group before it execs (`wrap`), so nothing it starts escapes the count.
"""
from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path

from . import agent

ROOT = agent.CGROUP_ROOT
PARENT = "sfubench"
PERIOD_US = 100_000   # the kernel's own default CFS period
MIN_QUOTA_US = 1000   # the smallest quota the kernel takes
# Of each real-time period, what the parent group lends its children's real-time threads: under
# the root's 95 %, and room for two labs' clients side by side (REALTIME_SHARE each).
PARENT_REALTIME_SHARE = 0.9
REALTIME_SHARE = 0.4


class CgroupError(RuntimeError):
    pass


def version() -> int | None:
    """2 or 1, whichever hierarchy carries the cpu controller here; None without one."""
    controllers = ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return 2
    if (ROOT / "cpu" / "cgroup.procs").exists() and (ROOT / "cpuacct" / "cgroup.procs").exists():
        return 1
    return None


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:
        raise CgroupError(f"cannot write {value!r} to {path}: {e.strerror}") from None


class CpuGroup:
    """One role's group. `cores` > 0 caps it at that many cores' worth of CPU time in every CFS
    period of `period_us`; `cpus` (a list such as "0" or "0-1") pins it. `realtime` > 0 lets its
    threads run real-time (SCHED_FIFO) for up to that share of each CPU's time, where the kernel
    schedules real-time threads by group (cgroup v1 with RT_GROUP_SCHED: a group's share starts at
    none); elsewhere the kernel's own rules apply. A capped group gets no real-time share: the CFS
    quota does not hold real-time threads, which would run beyond the cap (a real-time busy loop
    used 0.29 core under a 0.1-core quota here)."""

    def __init__(self, name: str, cores: float = 0.0, cpus: str = "", period_us: int = PERIOD_US,
                 realtime: float = 0.0):
        self.name = name
        self.cores = cores
        self.cpus = cpus
        self.period_us = period_us
        self.realtime = realtime
        self.version = version()
        if self.version is None:
            raise CgroupError("no cgroup cpu controller on this host (neither v2 nor v1 is mounted)")

    # -- where it lives --------------------------------------------------------------------
    def _dirs(self) -> dict[str, Path]:
        """controller -> the group's folder in it."""
        if self.version == 2:
            d = ROOT / PARENT / self.name
            return {"cpu": d, "cpuacct": d, **({"cpuset": d} if self.cpus else {})}
        out = {c: ROOT / c / PARENT / self.name for c in ("cpu", "cpuacct")}
        cpuset = ROOT / "cpuset" / PARENT / self.name
        if self.cpus or cpuset.exists():   # one a run pinned: its own to remove as well
            out["cpuset"] = cpuset
        return out

    @classmethod
    def named(cls, prefix: str) -> list["CpuGroup"]:
        """The groups whose names start with `prefix`, in any controller's hierarchy."""
        parents = [ROOT / PARENT] if version() == 2 else [ROOT / c / PARENT for c in ("cpu", "cpuacct", "cpuset")]
        return [cls(name) for name in sorted({d.name for p in parents if p.is_dir() for d in p.iterdir()
                                              if d.is_dir() and d.name.startswith(prefix)})]

    def procs_files(self) -> list[Path]:
        return sorted({d / "cgroup.procs" for d in self._dirs().values()})

    # -- lifecycle ------------------------------------------------------------------------
    def create(self) -> "CpuGroup":
        self.remove()   # a stale group of a crashed run with the same name
        if self.version == 2:
            parent = ROOT / PARENT
            parent.mkdir(exist_ok=True)
            wanted = "+cpu" + (" +cpuset" if self.cpus else "")
            _write(ROOT / "cgroup.subtree_control", wanted)
            _write(parent / "cgroup.subtree_control", wanted)
        for controller, d in self._dirs().items():
            d.mkdir(parents=True, exist_ok=True)
            if controller == "cpuset" and self.version == 1:
                # v1 cpuset groups start empty, parents included: a task cannot join until set.
                for level in (d.parent, d):
                    for key in ("cpuset.mems", "cpuset.cpus"):
                        if not (level / key).read_text().strip():
                            _write(level / key, (level.parent / key).read_text().strip())
        dirs = self._dirs()
        if self.cpus:
            _write(dirs["cpuset"] / "cpuset.cpus", self.cpus)
        if self.cores > 0:
            period = self.effective_period_us()
            quota = round(self.cores * period)
            if self.version == 2:
                _write(dirs["cpu"] / "cpu.max", f"{quota} {period}")
            else:   # a new group's quota is unlimited: any period goes first
                _write(dirs["cpu"] / "cpu.cfs_period_us", str(period))
                _write(dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        if self.realtime > 0 and not self.cores:
            self._lend_realtime(dirs["cpu"])
        return self

    def _lend_realtime(self, d: Path) -> None:
        """Gives the group its real-time share, its parent first (a child's share must fit in the
        parent's). Best effort: without it the threads that ask for real-time run as normal ones,
        and what that costs them shows where it is measured (the generator's pacing)."""
        if not (d / "cpu.rt_runtime_us").exists():
            return
        try:
            for level, share in ((d.parent, PARENT_REALTIME_SHARE), (d, self.realtime)):
                period = int((level / "cpu.rt_period_us").read_text())
                if int((level / "cpu.rt_runtime_us").read_text()) < share * period:
                    (level / "cpu.rt_runtime_us").write_text(str(round(share * period)))
        except (OSError, ValueError):
            pass

    def effective_period_us(self) -> int:
        """The period asked for, lengthened where the quota in it would fall under the kernel's
        1 ms minimum (a budget of 0.02 core gets 50 ms)."""
        return max(self.period_us, -(-MIN_QUOTA_US * 1_000_000 // round(self.cores * 1_000_000)))

    def remove(self) -> None:
        """Ends whatever still runs in the group, then deletes it."""
        dirs = [d for d in self._dirs().values() if d.exists()]
        for d in dirs:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                pids = self._read_pids(d)
                for pid in pids:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                deadline = time.monotonic() + 3
                while self._read_pids(d) and time.monotonic() < deadline:
                    time.sleep(0.05)
        for d in dirs:
            try:
                d.rmdir()
            except OSError:
                pass

    @staticmethod
    def _read_pids(d: Path) -> list[int]:
        try:
            return [int(p) for p in (d / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def wrap(self, argv: list[str]) -> list[str]:
        """argv that joins this group, then execs `argv`."""
        joins = " && ".join(f"echo $$ > {shlex.quote(str(f))}" for f in self.procs_files())
        return ["sh", "-c", f'{joins} && exec "$@"', "sfubench-cgroup", *argv]

    # -- readings -------------------------------------------------------------------------
    def pids(self) -> list[int]:
        return self._read_pids(self._dirs()["cpuacct"])

    def usage_s(self) -> float:
        """CPU seconds used by the group since it was created."""
        return agent.usage_s(self._dirs()["cpuacct"], self.version)

    def throttled_s(self) -> float:
        """Seconds the quota held the group back (0 without a quota), summed over its CPUs."""
        return agent.throttled_s(self._dirs()["cpu"], self.version)

    def periods(self) -> dict:
        """CFS periods run and throttled (agent.quota_periods)."""
        return agent.quota_periods(self._dirs()["cpu"])

    def describe(self) -> dict:
        """What the run's metadata records about the group."""
        return {"cgroup": f"v{self.version}:{PARENT}/{self.name}", "cores": self.cores or None,
                "cpus": self.cpus or None, "period_ms": self.effective_period_us() / 1000 if self.cores else None}
