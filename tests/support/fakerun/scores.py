"""The scores of captured frames (quality.jsonl), the frame codes' playback (playback.jsonl) and the
recordings of what browsers heard (speech.jsonl)."""
from __future__ import annotations

from .model import Model


def quality(rng, m: Model, at: tuple, pair: tuple, reference: bool) -> dict:
    """`at`: (t, phase, participants, room); `pair`: (user, peer)."""
    (t, phase, p, room), (user, peer) = at, pair
    d = m.degradation(p)
    frozen = rng.random() < 0.02 + 0.5 * d
    return {"t": t + rng.uniform(0, 1000), "phase": phase, "participants": p, "room": room, "user": user,
            "peer": peer, "code": rng.randrange(1 << 16),
            "brisque": round((22 + 30 * d) * m.noise(0.15), 2),
            "psnr": round((38 - 12 * d) * m.noise(0.05), 2) if reference else None,
            "ssim": round((0.97 - 0.2 * d) * m.noise(0.01), 4) if reference else None,
            "vmaf": round(min(100.0, (92 - 50 * d) * m.noise(0.04)), 2) if reference else None,
            "frozen": frozen}


def playback(rng, m: Model, at: tuple, pair: tuple, duration: float) -> dict:
    (t, phase, p, room), (user, peer) = at, pair
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


def speech(m: Model, at: tuple, pair: tuple) -> dict:
    """A recording's scores, drawn from no random number: the other figures stay as they were."""
    (t, phase, p, room), (user, peer) = at, pair
    d = m.degradation(p)
    return {"t": t, "phase": phase, "window": None, "participants": p, "room": room, "user": user, "peer": peer,
            "visqol": round(4.6 - 2.5 * d, 3), "pesq": round(4.2 - 2.5 * d, 3),
            "mouth_to_ear_ms": round(90 + 300 * d, 1), "codes": 2}
