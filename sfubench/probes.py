"""CPU and memory probes, one per role: `sfu`, `clients` (the grid and its browsers), `machine` (every
core of the host) and `engine` (this process). Each row of server.jsonl carries the role's cumulative
CPU seconds (`cpu_s`), so the CPU of any window is Δcpu_s / Δt between the rows at its edges; `cpu`
(cores since the previous row) for the time series; and `cores`, what the role may use at most (its
quota, else the machine's cores), which the client-bound rule compares the clients' CPU with."""
from __future__ import annotations

import os
import time

import psutil

from .cgroups import CpuGroup


class Probe:
    role = ""

    def __init__(self, cores: float | None = None):
        self.cores = cores or os.cpu_count()
        self.last = None

    def read(self) -> tuple[float, int, dict]:
        """(cumulative CPU seconds, resident bytes, extra fields)."""
        raise NotImplementedError

    def sample(self, **fields) -> dict:
        now = time.time()
        cpu_s, rss, extra = self.read()
        row = {"t": int(now * 1000), "role": self.role, "cpu_s": round(cpu_s, 3), "rss": rss,
               "cores": self.cores, **extra, **fields}
        if self.last:
            dt = now - self.last[0]
            row["cpu"] = round((cpu_s - self.last[1]) / dt, 4) if dt > 0 else None
        self.last = (now, cpu_s)
        return row


def _rss(pids) -> int:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


class GroupProbe(Probe):
    """A role in its own cgroup: CPU exactly as the kernel accounts it, and the time its quota held
    it back."""

    def __init__(self, role: str, group: CpuGroup):
        super().__init__(group.cores or (len(_cpu_list(group.cpus)) if group.cpus else None))
        self.role = role
        self.group = group

    def read(self):
        pids = self.group.pids()
        return self.group.usage_s(), _rss(pids), {"throttled_s": round(self.group.throttled_s(), 3)}


class TreeProbe(Probe):
    """A role as the process trees under `roots()`, where no cgroup holds it (a remote grid's
    browsers are not on this host at all: nothing to probe)."""

    def __init__(self, role: str, roots):
        super().__init__()
        self.role = role
        self.roots = roots
        self.dead = 0.0      # CPU of processes that ended: kept so the cumulative never drops
        self.seen: dict[int, tuple[float, float]] = {}   # pid -> (create_time, last cpu seconds)

    def _tree(self):
        for pid in self.roots():
            try:
                root = psutil.Process(pid)
                yield root
                yield from root.children(recursive=True)
            except psutil.NoSuchProcess:
                continue

    def read(self):
        total, rss, alive = 0.0, 0, {}
        for p in self._tree():
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu = t.user + t.system
                    rss += p.memory_info().rss
                    alive[p.pid] = (p.create_time(), cpu)
            except psutil.NoSuchProcess:
                continue
            total += cpu
        for pid, (created, cpu) in self.seen.items():
            if pid not in alive or alive[pid][0] != created:
                self.dead += cpu
        self.seen = alive
        return total + self.dead, rss, {}


class MachineProbe(Probe):
    """Every core of the host: when the machine is saturated, no role's figures can be trusted."""
    role = "machine"

    def read(self):
        t = psutil.cpu_times()
        busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        return busy, psutil.virtual_memory().used, {}


class EngineProbe(Probe):
    """This process alone (the collector and runner), not the servers it started."""
    role = "engine"

    def read(self):
        p = psutil.Process()
        t = p.cpu_times()
        return t.user + t.system, p.memory_info().rss, {}


def _cpu_list(spec: str) -> list[int]:
    out = []
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out
