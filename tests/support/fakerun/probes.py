"""The engine's CPU probes (server.jsonl): cumulative CPU seconds and RSS of the SFU, the browsers and
the machine."""
from __future__ import annotations

from .model import Model


class Probe:
    CORES = 2

    def __init__(self, m: Model, started, client_bound_after: int | None = None):
        self.m, self.started, self.client_bound_after = m, started, client_bound_after
        self.rows: list[dict] = []
        self.state = {"sfu": (None, 0.0), "clients": (None, 0.0), "machine": (None, 0.0)}  # role -> (t, cpu_s)

    def cores(self, role: str, p: int) -> float:
        if role == "machine":
            starved = self.client_bound_after is not None and p > self.client_bound_after
            return self.CORES * (0.99 if starved else 0.5)
        return (0.05 + 0.0035 * p if role == "sfu" else 0.3 * p) * self.m.noise(0.05)

    def read(self, t: float, phase: str, window: int, edge: str) -> None:
        p = self.started(t)
        for role, (last, cpu_s) in self.state.items():
            row = {"t": int(t), "role": role, "rss": int((40 + 1.5 * p if role == "sfu" else 45 * p) * 1e6),
                   "cores": self.CORES, "phase": phase, "window": window, "edge": edge, "participants": p}
            if last is not None:
                dt = (t - last) / 1000
                cpu_s += self.cores(role, p) * dt
                row["cpu"] = round(self.cores(role, p), 4)
            row["cpu_s"] = round(cpu_s, 3)
            self.state[role] = (t, cpu_s)
            self.rows.append(row)

    def target_summary(self) -> dict:
        """What loadtest._cpu_summary puts in meta.json."""
        out = {}
        for role in self.state:
            edge = {r["edge"]: r for r in self.rows if r["role"] == role and r["phase"] == "target"}
            if "start" in edge and "end" in edge:
                seconds = (edge["end"]["t"] - edge["start"]["t"]) / 1000
                cores = (edge["end"]["cpu_s"] - edge["start"]["cpu_s"]) / seconds
                out[f"{role}_cores"] = round(cores, 3)
                out[f"{role}_per_participant"] = round(cores / edge["end"]["participants"], 4)
        return out
