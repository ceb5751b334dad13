"""The calibration's cache: calibration.json in the build cache, per machine, the clients' capacity
per scenario and each adapter version's cost per scenario (sfubench/calibrate.py measures them)."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from .config import foreign_to


def _key(values) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Cache:
    """calibration.json in the build cache: per machine, the clients' capacity per scenario and each
    adapter version's cost per scenario."""

    def __init__(self, root: Path, cfg):
        from .agent import machine_facts
        facts = machine_facts()
        self.path = root / "calibration.json"
        self.machine = _key([facts[k] for k in ("hostname", "cpu_model", "cpus", "memory_bytes", "kernel")])
        # other shapes' settings shape nothing calibrated here: a new one must not cost a calibration
        foreign = foreign_to(cfg.shape)
        self.scenario = _key({k: v for k, v in cfg.scenario().items() if k != "sfu_cpus" and k not in foreign})

    def _all(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get(self, what: str):
        return self._all().get(self.machine, {}).get(f"{what}|{self.scenario}")

    def put(self, what: str, value: dict) -> None:
        data = self._all()
        data.setdefault(self.machine, {})[f"{what}|{self.scenario}"] = {**value, "measured": time.time()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(self.path)


