"""CPU and memory probes of whole process trees (the SFU; the browsers). Each row of server.jsonl
carries the cumulative CPU seconds (`cpu_s`) so the CPU of any window is Δcpu_s / Δt between the
rows at its edges, and `cpu` (cores) since the previous row for the time series."""
from __future__ import annotations

import time

import psutil


class CpuProbe:
    def __init__(self, role: str, roots):
        """`roots()` returns the pids whose whole process trees are measured."""
        self.role = role
        self.roots = roots
        self.dead = 0.0      # CPU of processes that ended: kept so the cumulative never drops
        self.seen: dict[int, tuple[float, float]] = {}   # pid -> (create_time, last cpu seconds)
        self.last = None

    def _tree(self):
        for pid in self.roots():
            try:
                root = psutil.Process(pid)
                yield root
                yield from root.children(recursive=True)
            except psutil.NoSuchProcess:
                continue

    def read(self) -> tuple[float, int]:
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
        return total + self.dead, rss

    def sample(self, **fields) -> dict:
        now = time.time()
        cpu_s, rss = self.read()
        row = {"t": int(now * 1000), "role": self.role, "cpu_s": round(cpu_s, 3), "rss": rss, **fields}
        if self.last:
            dt = now - self.last[0]
            row["cpu"] = round((cpu_s - self.last[1]) / dt, 4) if dt > 0 else None
        self.last = (now, cpu_s)
        return row
