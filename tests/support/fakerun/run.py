"""A fake run's own records: its plan (rooms joining one by one), its events and checks, its windows,
and its meta.json, as the engine writes them (sfubench/runner.py, loadtest.py, probes.py): int window
ids, participant_started events, probe rows per role with cumulative CPU seconds, the probe's full
sample fields with nulls."""
from __future__ import annotations

import bisect
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import scores
from .model import Model
from .probes import Probe
from .streams import sample, stream


@dataclass(frozen=True)
class FakeRun:
    """What a fake run is. `crash_after_room`: it stops after that room's ramp step: no target, no
    run_finished, a cut-off last samples line, and neither quality.jsonl nor server.jsonl.
    `reference=False` leaves PSNR/SSIM/VMAF null. `config` entries override the settings recorded in
    meta.json. Past `knee` participants the SFU degrades; past `client_bound_after` the clients are
    starved: their windows record slow getStats rounds and a lagging main thread, and the machine's
    cores are saturated."""
    sfu: str = "janus"
    version: str = "1.1.2"
    rooms: int = 3
    users_per_room: int = 7
    knee: int | None = None
    seed: int = 0
    room_interval_s: float = 20.0
    background_interval_s: float = 30.0
    ramp_samples: int = 2
    target_samples: int = 8
    crash_after_room: int | None = None
    quality: bool = True
    reference: bool = True
    server: bool = True
    start_ms: int = 1_760_000_000_000
    config: dict | None = None
    name: str | None = None
    client_bound_after: int | None = None

    @property
    def crashed(self) -> bool:
        return self.crash_after_room is not None


class Plan:
    """When each room and participant joins, the target and the end."""

    def __init__(self, spec: FakeRun):
        built = min(spec.rooms, spec.crash_after_room) if spec.crashed else spec.rooms
        self.users = {r: [f"r{r}u{i}" for i in range(1, spec.users_per_room + 1)] for r in range(1, built + 1)}
        self.room_of = {u: r for r, members in self.users.items() for u in members}
        t0 = self.t0 = spec.start_ms
        self.room_t = {r: t0 + 5000 + (r - 1) * spec.room_interval_s * 1000 for r in self.users}
        self.user_t = {u: self.room_t[self.room_of[u]] + 300 * i for r in self.users for i, u in enumerate(self.users[r])}
        self.starts = sorted(self.user_t.values())
        self.target_t = t0 + 5000 + built * spec.room_interval_s * 1000
        self.end_t = (self.room_t[built] + spec.room_interval_s * 500 if spec.crashed
                      else self.target_t + (spec.target_samples + 3) * 1000)

    def started(self, t: float) -> int:
        return bisect.bisect_right(self.starts, t)


@dataclass
class Records:
    events: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    quality: list = field(default_factory=list)
    playback: list = field(default_factory=list)
    speech: list = field(default_factory=list)
    measurements: list = field(default_factory=list)   # (first sample t, phase, participants sampled, samples)


def make_run(parent: str | Path, **options) -> Path:
    """Writes a run folder under `parent` (options: FakeRun's) and returns its path."""
    spec = FakeRun(**options)
    rng = random.Random(spec.seed)
    m = Model(spec.knee, rng)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(spec.start_ms / 1000))
    run_dir = Path(parent) / (spec.name or f"{stamp}-{spec.sfu}")
    run_dir.mkdir(parents=True, exist_ok=False)
    plan = Plan(spec)
    streams = _streams(plan, rng)
    records = _rooms(spec, plan, m, rng)
    _target(spec, plan, records, m, rng)
    _background(spec, plan, records)
    probe = Probe(m, plan.started, spec.client_bound_after)
    windows = _samples(run_dir, (spec, plan), streams, records.measurements, probe, m)
    _write(run_dir, spec, records, windows, probe)
    _write_meta(run_dir, (spec, plan), records.checks, probe)
    return run_dir


def _streams(plan: Plan, rng) -> dict[str, list[dict]]:
    out = {}
    for r, members in plan.users.items():
        for u in members:
            own = [stream(rng, u, None, "send", k) for k in ("audio", "video")]
            own += [stream(rng, u, peer, "recv", k) for peer in members if peer != u for k in ("audio", "video")]
            for st in own:
                st["t"] = plan.room_t[r] + 2500 + rng.uniform(0, 500)   # media flows once the room is up
            out[u] = own
    return out


def _rooms(spec: FakeRun, plan: Plan, m: Model, rng) -> Records:
    """Each room's joins, checks and validation, its ramp step and the frames scored there."""
    rec = Records(events=[{"t": plan.t0, "event": "run_started", "room": None, "participants": 0}])
    for r, rt in plan.room_t.items():
        members = plan.users[r]
        rec.events.append({"t": rt, "event": "room_started", "room": r, "participants": plan.started(rt - 1)})
        rec.events += [{"t": plan.user_t[u], "event": "participant_started", "room": r,
                        "participants": plan.started(plan.user_t[u]), "user": u} for u in members]
        p = plan.started(rt + 5000)
        d = m.degradation(p)
        failed = 0
        for u in members:
            if rng.random() < 0.03 * d:
                rec.events.append({"t": rt + 4000, "event": "participant_failed", "room": r, "participants": p,
                                   "user": u, "reason": "ICE connection failed"})
            for peer in members:
                ok = rng.random() >= 0.01 + 0.7 * d
                failed += not ok
                verdict = "playing" if ok else rng.choices(["frozen", "blank", "missing", "timeout"], [5, 3, 1, 1])[0]
                rec.checks.append({"t": rt + 8000 + rng.uniform(0, 2000), "room": r, "user": u, "peer": peer,
                                   "ok": ok, "verdict": verdict, "elapsed": round(8 + rng.uniform(0, 2), 2)})
        rec.events.append({"t": rt + 11000, "event": "room_validated" if failed <= 0.2 * len(members) ** 2
                           else "room_timeout", "room": r, "participants": p})
        rec.measurements.append((rt + 12000, "ramp", [u for rr in plan.users if rr <= r for u in plan.users[rr]],
                                 spec.ramp_samples))
        if spec.quality:
            for _ in range(3):
                pair = rng.sample(members, 2)
                rec.quality.append(scores.quality(rng, m, (rt + 13000, "ramp", p, r), pair, spec.reference))
                rec.playback.append(scores.playback(rng, m, (rt + 12000, "ramp", p, r), pair, 1.0))
                rec.speech.append(scores.speech(m, (rt + 12000, "ramp", p, r), pair))
    return rec


def _target(spec: FakeRun, plan: Plan, rec: Records, m: Model, rng) -> None:
    if spec.crashed:
        return
    p = plan.started(plan.target_t)
    rec.events.append({"t": plan.target_t, "event": "target_reached", "room": None, "participants": p})
    rec.measurements.append((plan.target_t + 1000, "target", list(plan.room_of), spec.target_samples))
    if spec.quality:
        for r in plan.users:
            for _ in range(2):
                pair = rng.sample(plan.users[r], 2)
                rec.quality.append(scores.quality(rng, m, (plan.target_t + 4000, "target", p, r), pair, spec.reference))
                rec.playback.append(scores.playback(rng, m, (plan.target_t + 3000, "target", p, r), pair, 7.0))
                rec.speech.append(scores.speech(m, (plan.target_t + 3000, "target", p, r), pair))
    rec.events.append({"t": plan.end_t, "event": "run_finished", "room": None, "participants": p, "status": "ok"})


def _background(spec: FakeRun, plan: Plan, rec: Records) -> None:
    if not spec.background_interval_s:
        return
    t = plan.t0 + spec.background_interval_s * 1000
    while t < plan.end_t:
        present = [u for u in plan.room_of if plan.room_t[plan.room_of[u]] + 3000 <= t]
        if present:
            rec.measurements.append((t, "background", present, 1))
        t += spec.background_interval_s * 1000


def _samples(run_dir: Path, run: tuple, streams: dict, measurements: list, probe: Probe, m: Model) -> list[dict]:
    """samples.jsonl, the probe's rows at each window's edges, and the windows' records."""
    spec, plan = run
    windows = []
    with open(run_dir / "samples.jsonl", "w") as f:
        for window, (mt, phase, members, n) in enumerate(sorted(measurements, key=lambda x: x[0]), 1):
            edges = ("tick",) if phase == "background" else ("start", "end")
            probe.read(mt - 50, phase, window, edges[0])
            for k in range(n):
                jt = mt + k * 1000
                p = plan.started(jt)
                f.write("\n".join(json.dumps(sample(st, jt + m.rng.uniform(0, 40), (phase, window, p, plan.room_of[u]), m))
                                  for u in members for st in streams[u]) + "\n")
            if len(edges) == 2:
                probe.read(mt + (n - 1) * 1000 + 100, phase, window, "end")
            windows.append(_window(spec, (mt, phase, window, n), plan.started(mt), len(members)))
        if spec.crashed:
            f.write('{"t": %d, "phase": "backgr' % plan.end_t)
    return windows


def _window(spec: FakeRun, measured: tuple, p: int, expected: int) -> dict:
    mt, phase, window, n = measured
    starved = spec.client_bound_after is not None and p > spec.client_bound_after
    return {"t": int(mt + (n - 1) * 1000 + 700), "phase": phase, "window": window,
            "participants": p, "opened": int(mt), "closed": int(mt + (n - 1) * 1000 + 700),
            "samples": n, "expected": expected, "missing_samples": 0,
            "duration_s": round((n - 1) * (3.0 if starved else 1.0) + 0.1, 3),
            "stats_ms_p50": 1400.0 if starved else 25.0, "stats_ms_max": 2900.0 if starved else 80.0,
            "lag_ms_max": 1800.0 if starved else 60.0, "lag_ms_mean": 90.0 if starved else 3.0}


def _write(run_dir: Path, spec: FakeRun, rec: Records, windows: list[dict], probe: Probe) -> None:
    _write_jsonl(run_dir / "events.jsonl", sorted(rec.events, key=lambda e: e["t"]))
    _write_jsonl(run_dir / "checks.jsonl", sorted(rec.checks, key=lambda c: c["t"]))
    if spec.quality and not spec.crashed:
        _write_jsonl(run_dir / "quality.jsonl", sorted(rec.quality, key=lambda q: q["t"]))
        _write_jsonl(run_dir / "speech.jsonl", sorted(rec.speech, key=lambda q: q["t"]))
    if spec.quality:   # the engine appends playback live, so a crashed run keeps it
        _write_jsonl(run_dir / "playback.jsonl", sorted(rec.playback, key=lambda q: q["t"]))
    if spec.server and not spec.crashed:
        _write_jsonl(run_dir / "server.jsonl", probe.rows)
    _write_jsonl(run_dir / "windows.jsonl", windows)


def _write_meta(run_dir: Path, run: tuple, checks: list[dict], probe: Probe) -> None:
    spec, plan = run
    settings = {"sfu": spec.sfu, "rooms": spec.rooms, "users_per_room": spec.users_per_room,
                "participants_per_browser": 7, "media": "paper", "video_timeout": 60.0,
                "ramp_samples": spec.ramp_samples, "target_samples": spec.target_samples, "sample_interval": 1.0,
                "background_interval": spec.background_interval_s, "quality_frames": 2, "sfu_options": "",
                "out": "runs", "cache": "~/.cache/sfubench", "grid_url": "", "lab_prefix": "sfub",
                "lab_subnet": "127.0.1"}
    settings.update(spec.config or {})
    # the engine's schema marks these as not defining the scenario (sfubench/config.py)
    scenario = {k: v for k, v in settings.items() if k not in (
        "sfu", "sfu_options", "out", "cache", "grid_url", "lab_prefix", "lab_subnet", "participants_per_browser")}
    ok = sum(1 for c in checks if c["ok"])
    meta = {
        "config": settings,
        "scenario": scenario,
        "sfu": {"name": spec.sfu, "version": spec.version, "installed": f"{spec.sfu} {spec.version}",
                "options": {"bitrate": 0}},
        "chrome": {"version": "156.0.8078.79"},
        "media": {"profile": "paper", "width": 540, "height": 360, "fps": 30, "loop_frames": 300},
        "git_sha": "3f2c1a9e0b7d4c5a6e8f9a0b1c2d3e4f5a6b7c8d",
        "machine": {"hostname": "lab-1", "cpus": 2, "cpu_model": "AMD EPYC", "cpu_mhz": 2445.0,
                    "memory_bytes": 25276502016, "kernel": "6.18.44", "python": "3.11.7"},
        "started": spec.start_ms / 1000,
        "status": "running" if spec.crashed else "ok",
    }
    if not spec.crashed:
        meta.update(finished=plan.end_t / 1000, checks={"passed": ok, "failed": len(checks) - ok},
                    cpu=probe.target_summary() if spec.server else {})
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=2))


def _write_jsonl(path: Path, records: list[dict]) -> None:
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
