"""Realistic run folders, generated per docs/contracts.md, for the tests and the benchmark.

The load follows the study's ramp: rooms added one by one, each validated by video checks and measured
with `ramp_samples` getStats samples of its participants one second apart; at target load every participant
is sampled `target_samples` times; background ticks sample everyone once. Counters are cumulative per
stream, so bitrates computed from them come out as modelled. Past `knee` participants the SFU degrades:
bitrates fall, RTT, jitter, loss and freezes climb, checks fail and quality drops. Past
`client_bound_after` participants the clients are starved instead: their windows record slow getStats
rounds and a lagging main thread (windows.jsonl), and the machine's cores are saturated.
"""
from __future__ import annotations

import bisect
import json
import math
import random
import time
from pathlib import Path

SEND_CAP_BPS = 1.7e6
AUDIO_BPS = 32_000


class _Model:
    def __init__(self, knee: int | None, rng: random.Random):
        self.knee, self.rng = knee, rng

    def degradation(self, p: int) -> float:
        """0 up to the knee, rising to 1 at 1.5 × knee."""
        if self.knee is None or p <= self.knee:
            return 0.0
        return min(1.0, (p - self.knee) / (0.5 * self.knee))

    def noise(self, spread: float = 0.04) -> float:
        return 1.0 + self.rng.uniform(-spread, spread)

    def rate(self, p: int, direction: str, kind: str) -> float:
        d = self.degradation(p)
        if kind == "audio":
            return AUDIO_BPS * self.noise(0.02)
        send = SEND_CAP_BPS * (0.9 - 0.75 * d)
        return send * self.noise() if direction == "send" else send * (0.97 - 0.5 * d) * self.noise()

    def rtt(self, p: int) -> float:
        d = self.degradation(p)
        return (0.0015 + self.rng.uniform(0, 0.003)) * math.exp(6.0 * d)


def _stream(rng, user, peer, direction, kind) -> dict:
    return {"user": user, "peer": peer, "direction": direction, "kind": kind,
            "ssrc": rng.getrandbits(32), "t": None, "bytes": 0, "packets": 0, "lost": 0.0,
            "frames": 0, "qp": 0, "freezes": 0, "freeze_s": 0.0, "nack": 0, "pli": 0}


def _advance(st: dict, t: float, p: int, m: _Model) -> None:
    if st["t"] is not None and t > st["t"]:
        dt = (t - st["t"]) / 1000.0
        d = m.degradation(p)
        nbytes = m.rate(p, st["direction"], st["kind"]) * dt / 8
        packets = nbytes / (1100 if st["kind"] == "video" else 80)
        st["bytes"] += int(nbytes)
        st["packets"] += int(packets)
        st["lost"] += packets * (0.001 + 0.08 * d) * m.noise(0.5)
        if st["kind"] == "video":
            frames = dt * 30 * (1 - 0.6 * d)
            st["frames"] += int(frames)
            st["qp"] += int(frames * (20 + 40 * d))
            st["nack"] += int(packets * 0.02 * d * 10)
            st["pli"] += int(dt * d)
            if st["direction"] == "recv" and m.rng.random() < 4.0 * d * dt / 60:
                st["freezes"] += 1
                st["freeze_s"] += 0.2 + m.rng.random()
    st["t"] = t if st["t"] is None else max(t, st["t"])


PROBE_FIELDS = ("availableOutgoingBitrate", "bytes", "codec", "direction", "frameHeight", "frameWidth", "framesDecoded",
                "framesDropped", "framesEncoded", "framesPerSecond", "freezeCount", "jitter", "kind", "nackCount",
                "packets", "packetsLost", "peer", "pliCount", "qpSum", "qualityLimitationBandwidth",
                "qualityLimitationCpu", "qualityLimitationReason", "rtt", "ssrc", "t", "targetBitrate",
                "totalFreezesDuration")


def _sample(st: dict, t: float, phase: str, window: int, p: int, room: int, m: _Model) -> dict:
    """One sample as the probe writes it: every field present, null where it does not apply."""
    _advance(st, t, p, m)
    d = m.degradation(p)
    send, video = st["direction"] == "send", st["kind"] == "video"
    s = dict.fromkeys(PROBE_FIELDS)
    s.update({"t": round(st["t"], 3), "direction": st["direction"],
              "kind": st["kind"], "peer": st["peer"], "ssrc": st["ssrc"], "bytes": st["bytes"],
              "codec": "vp8" if video else "opus",
              "packets": st["packets"], "packetsLost": int(st["lost"]),
              "jitter": round((0.002 + 0.03 * d) * m.noise(0.3), 5), "rtt": round(m.rtt(p), 5)})
    if video:
        s.update({"framesEncoded" if send else "framesDecoded": st["frames"], "frameWidth": 540, "frameHeight": 360,
                  "framesPerSecond": round(30 * (1 - 0.6 * d) * m.noise(0.05), 1), "qpSum": st["qp"],
                  "nackCount": st["nack"], "pliCount": st["pli"]})
        if not send:
            s.update({"freezeCount": st["freezes"], "totalFreezesDuration": round(st["freeze_s"], 3)})
    if send:
        rate = m.rate(p, "send", st["kind"])
        s.update({"availableOutgoingBitrate": round(rate * 1.3), "targetBitrate": round(rate)})
        if video:
            s.update({"qualityLimitationReason": "bandwidth" if d else "none", "qualityLimitationCpu": 0.0,
                      "qualityLimitationBandwidth": 0.0})
    s.update({"phase": phase, "window": window, "participants": p, "room": room, "user": st["user"]})
    return s


def make_run(parent: str | Path, *, sfu: str = "janus", version: str = "1.1.2", rooms: int = 3,
             users_per_room: int = 7, knee: int | None = None, seed: int = 0, room_interval_s: float = 20.0,
             background_interval_s: float = 30.0, ramp_samples: int = 2, target_samples: int = 8,
             crash_after_room: int | None = None, quality: bool = True, reference: bool = True,
             server: bool = True, start_ms: int = 1_760_000_000_000, config: dict | None = None,
             name: str | None = None, client_bound_after: int | None = None) -> Path:
    """Write a run folder under `parent` and return its path. The records follow the engine's own
    (sfubench/runner.py, loadtest.py, probes.py): int window ids, participant_started events, probe rows
    per role with cumulative CPU seconds, the probe's full sample fields with nulls.

    crash_after_room: stop after that room's ramp step — no target, no run_finished, a cut-off last
    samples line, and neither quality.jsonl nor server.jsonl. reference=False leaves PSNR/SSIM/VMAF null.
    `config` entries override the settings recorded in meta.json."""
    rng = random.Random(seed)
    m = _Model(knee, rng)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start_ms / 1000))
    run_dir = Path(parent) / (name or f"{stamp}-{sfu}")
    run_dir.mkdir(parents=True, exist_ok=False)
    crashed = crash_after_room is not None
    built = min(rooms, crash_after_room) if crashed else rooms

    users = {r: [f"r{r}u{i}" for i in range(1, users_per_room + 1)] for r in range(1, built + 1)}
    room_of = {u: r for r, members in users.items() for u in members}
    t0 = start_ms
    room_t = {r: t0 + 5000 + (r - 1) * room_interval_s * 1000 for r in users}
    user_t = {u: room_t[room_of[u]] + 300 * i for r in users for i, u in enumerate(users[r])}
    starts = sorted(user_t.values())
    target_t = t0 + 5000 + built * room_interval_s * 1000
    end_t = room_t[built] + room_interval_s * 500 if crashed else target_t + (target_samples + 3) * 1000

    def started(t: float) -> int:
        return bisect.bisect_right(starts, t)

    streams: dict[str, list[dict]] = {}
    for r, members in users.items():
        for u in members:
            own = [_stream(rng, u, None, "send", k) for k in ("audio", "video")]
            own += [_stream(rng, u, peer, "recv", k) for peer in members if peer != u for k in ("audio", "video")]
            for st in own:
                st["t"] = room_t[r] + 2500 + rng.uniform(0, 500)   # media flows once the room is up
            streams[u] = own

    events = [{"t": t0, "event": "run_started", "room": None, "participants": 0}]
    checks, quality_recs, playback_recs = [], [], []
    measurements = []   # (first sample t, phase, participants sampled, number of samples)
    for r, rt in room_t.items():
        events.append({"t": rt, "event": "room_started", "room": r, "participants": started(rt - 1)})
        events += [{"t": user_t[u], "event": "participant_started", "room": r, "participants": started(user_t[u]),
                    "user": u} for u in users[r]]
        p = started(rt + 5000)
        d = m.degradation(p)
        failed = 0
        for u in users[r]:
            if rng.random() < 0.03 * d:
                events.append({"t": rt + 4000, "event": "participant_failed", "room": r, "participants": p,
                               "user": u, "reason": "ICE connection failed"})
            for peer in users[r]:
                ok = rng.random() >= 0.01 + 0.7 * d
                failed += not ok
                verdict = "playing" if ok else rng.choices(["frozen", "blank", "missing", "timeout"],
                                                           [5, 3, 1, 1])[0]
                checks.append({"t": rt + 8000 + rng.uniform(0, 2000), "room": r, "user": u, "peer": peer,
                               "ok": ok, "verdict": verdict, "elapsed": round(8 + rng.uniform(0, 2), 2)})
        events.append({"t": rt + 11000, "event": "room_validated" if failed <= 0.2 * len(users[r]) ** 2
                       else "room_timeout", "room": r, "participants": p})
        measurements.append((rt + 12000, "ramp", [u for rr in users if rr <= r for u in users[rr]],
                             ramp_samples))
        if quality:
            for _ in range(3):
                u, peer = rng.sample(users[r], 2)
                quality_recs.append(_quality(rng, m, rt + 13000, "ramp", p, r, u, peer, reference))
                playback_recs.append(_playback(rng, m, rt + 12000, "ramp", p, r, u, peer, 1.0))

    if not crashed:
        p = started(target_t)
        events.append({"t": target_t, "event": "target_reached", "room": None, "participants": p})
        measurements.append((target_t + 1000, "target", list(room_of), target_samples))
        if quality:
            for r in users:
                for _ in range(2):
                    u, peer = rng.sample(users[r], 2)
                    quality_recs.append(_quality(rng, m, target_t + 4000, "target", p, r, u, peer, reference))
                    playback_recs.append(_playback(rng, m, target_t + 3000, "target", p, r, u, peer, 7.0))
        events.append({"t": end_t, "event": "run_finished", "room": None, "participants": p, "status": "ok"})

    if background_interval_s:
        t = t0 + background_interval_s * 1000
        while t < end_t:
            present = [u for u in room_of if room_t[room_of[u]] + 3000 <= t]
            if present:
                measurements.append((t, "background", present, 1))
            t += background_interval_s * 1000

    measurements.sort(key=lambda x: x[0])
    probe = _Probe(m, started, client_bound_after)
    windows = []
    with open(run_dir / "samples.jsonl", "w") as f:
        for window, (mt, phase, members, n) in enumerate(measurements, 1):
            edges = ("tick",) if phase == "background" else ("start", "end")
            probe.read(mt - 50, phase, window, edges[0])
            for k in range(n):
                jt = mt + k * 1000
                p = started(jt)
                f.write("\n".join(json.dumps(_sample(st, jt + rng.uniform(0, 40), phase, window, p, room_of[u], m))
                                  for u in members for st in streams[u]) + "\n")
            if len(edges) == 2:
                probe.read(mt + (n - 1) * 1000 + 100, phase, window, "end")
            p = started(mt)
            starved = client_bound_after is not None and p > client_bound_after
            windows.append({"t": int(mt + (n - 1) * 1000 + 700), "phase": phase, "window": window,
                            "participants": p, "opened": int(mt), "closed": int(mt + (n - 1) * 1000 + 700),
                            "samples": n, "expected": len(members), "missing_samples": 0,
                            "duration_s": round((n - 1) * (3.0 if starved else 1.0) + 0.1, 3),
                            "stats_ms_p50": 1400.0 if starved else 25.0, "stats_ms_max": 2900.0 if starved else 80.0,
                            "lag_ms_max": 1800.0 if starved else 60.0, "lag_ms_mean": 90.0 if starved else 3.0})
        if crashed:
            f.write('{"t": %d, "phase": "backgr' % end_t)

    _write_jsonl(run_dir / "events.jsonl", sorted(events, key=lambda e: e["t"]))
    _write_jsonl(run_dir / "checks.jsonl", sorted(checks, key=lambda c: c["t"]))
    if quality and not crashed:
        _write_jsonl(run_dir / "quality.jsonl", sorted(quality_recs, key=lambda q: q["t"]))
    if quality:   # the engine appends playback live, so a crashed run keeps it
        _write_jsonl(run_dir / "playback.jsonl", sorted(playback_recs, key=lambda q: q["t"]))
    if server and not crashed:
        _write_jsonl(run_dir / "server.jsonl", probe.rows)
    _write_jsonl(run_dir / "windows.jsonl", windows)

    settings = {"sfu": sfu, "rooms": rooms, "users_per_room": users_per_room, "participants_per_browser": 7,
                "media": "paper", "video_timeout": 60.0, "ramp_samples": ramp_samples,
                "target_samples": target_samples, "sample_interval": 1.0,
                "background_interval": background_interval_s, "quality_frames": 2, "sfu_options": "",
                "out": "runs", "cache": "~/.cache/sfubench", "grid_url": "", "lab_prefix": "sfub",
                "lab_subnet": "127.0.1"}
    settings.update(config or {})
    # the engine's schema marks these as not defining the scenario (sfubench/config.py)
    scenario = {k: v for k, v in settings.items() if k not in (
        "sfu", "sfu_options", "out", "cache", "grid_url", "lab_prefix", "lab_subnet", "participants_per_browser")}
    ok = sum(1 for c in checks if c["ok"])
    meta = {
        "config": settings,
        "scenario": scenario,
        "sfu": {"name": sfu, "version": version, "installed": f"{sfu} {version}", "options": {"bitrate": 0}},
        "chrome": {"version": "156.0.8078.79"},
        "media": {"profile": "paper", "width": 540, "height": 360, "fps": 30, "loop_frames": 300},
        "git_sha": "3f2c1a9e0b7d4c5a6e8f9a0b1c2d3e4f5a6b7c8d",
        "machine": {"hostname": "lab-1", "cpus": 2, "cpu_model": "AMD EPYC", "cpu_mhz": 2445.0, "memory_bytes": 25276502016,
                    "kernel": "6.18.44", "python": "3.11.7"},
        "started": start_ms / 1000,
        "status": "running" if crashed else "ok",
    }
    if not crashed:
        meta.update(finished=end_t / 1000, checks={"passed": ok, "failed": len(checks) - ok},
                    cpu=probe.target_summary() if server else {})
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=2))
    return run_dir


class _Probe:
    """The engine's CPU probes: cumulative CPU seconds and RSS of the SFU, the browsers and the machine."""
    CORES = 2

    def __init__(self, m: _Model, started, client_bound_after: int | None = None):
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


def _quality(rng, m: _Model, t, phase, p, room, user, peer, reference: bool) -> dict:
    d = m.degradation(p)
    frozen = rng.random() < 0.02 + 0.5 * d
    return {"t": t + rng.uniform(0, 1000), "phase": phase, "participants": p, "room": room, "user": user,
            "peer": peer, "code": rng.randrange(1 << 16),
            "brisque": round((22 + 30 * d) * m.noise(0.15), 2),
            "psnr": round((38 - 12 * d) * m.noise(0.05), 2) if reference else None,
            "ssim": round((0.97 - 0.2 * d) * m.noise(0.01), 4) if reference else None,
            "vmaf": round(min(100.0, (92 - 50 * d) * m.noise(0.04)), 2) if reference else None,
            "frozen": frozen}


def _playback(rng, m: _Model, t, phase, p, room, user, peer, duration: float) -> dict:
    d = m.degradation(p)
    fps = 15 * (1 - 0.6 * d) * m.noise(0.03)
    freezes = int(rng.random() < 0.5 * d * duration)
    return {"t": t, "phase": phase, "participants": p, "room": room, "user": user, "peer": peer,
            "frames": int(fps * duration), "decoded": int(fps * duration), "duration": duration,
            "shown": int(fps * duration), "effective_fps": round(fps, 2),
            "skipped": int((15 - fps) * duration), "backwards": 0, "freezes": freezes,
            "freeze_s": round(freezes * (0.5 + rng.random()), 3), "longest_freeze_s": 0.0,
            "delay_ms": round((80 + 400 * d) * m.noise(0.2), 1),
            "delay_ms_p90": round((120 + 600 * d) * m.noise(0.2), 1), "delays": int(fps * duration)}


def _write_jsonl(path: Path, records: list[dict]) -> None:
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
