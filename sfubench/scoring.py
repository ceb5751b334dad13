"""Scores received video at every measurement: frame code, BRISQUE, PSNR/SSIM against the source
frame the code names, glass-to-glass delay and freezes. Writes quality.jsonl and keeps the first
captured frame of every received video in frames/ (PNG: JPEG would shift BRISQUE).

Delay: each capture call draws every participant's own preview and the remotes it receives in one
JS turn, each draw with its own timestamp, so a sender's preview and a receiver's copy of it are
compared on one clock, and the time between the two draws is taken out. All browsers of
the local lab share this machine's clock; across machines that needs synchronised clocks (NTP),
and the report says which was used.
"""
from __future__ import annotations

import time
from pathlib import Path

from quality import brisque, delay, framecode, fullref

from .runner import decode_png

FROZEN_SPAN = delay.FREEZE_S


class Scorer:
    def __init__(self, media, frames_dir: Path, captures: int):
        self.media = media
        self.frames_dir = frames_dir
        self.captures = captures
        self.gap = FROZEN_SPAN / max(1, captures - 1) + 0.05

    def score(self, runner, phase: str, window: int) -> None:
        series: dict[tuple[str, str], list[tuple[float, object]]] = {}
        for i in range(self.captures):
            for browser in runner.browsers:
                requests = {p.id: [q.id for q in runner.participants if q.room == p.room]
                            for p in browser.participants}
                for key, shot in (browser.attempt("capture", browser.capture, requests,
                                                  runner=runner) or {}).items():
                    series.setdefault(key, []).append(shot)
            if i < self.captures - 1:
                time.sleep(self.gap)  # a background sample here would stretch the gap
        self.frames_dir.mkdir(parents=True, exist_ok=True)
        layout, loop, fps = self.media.layout, self.media.frames, self.media.fps
        decoded = {key: [(t, decode_png(url)) for t, url in shots] for key, shots in series.items()}
        codes = {key: [(t, framecode.decode(rgb, layout) if rgb is not None else None)
                       for t, rgb in shots] for key, shots in decoded.items()}
        room_of = {p.id: p.room for p in runner.participants}
        for (p_id, user), shots in decoded.items():
            if user == p_id:
                continue   # a participant's own preview is the reference for the others' delay
            own = codes.get((user, user), [])
            seen = [c for _, c in codes[(p_id, user)] if c is not None]
            span = shots[-1][0] - shots[0][0] if shots else 0
            frozen = (len(seen) == len(shots) >= 2 and len(set(seen)) == 1 and span >= FROZEN_SPAN)
            for i, ((t, rgb), (_, code)) in enumerate(zip(shots, codes[(p_id, user)])):
                rec = {"t": int(t * 1000), "phase": phase, "window": window,
                       "participants": runner.status.participants, "room": room_of[p_id],
                       "user": p_id, "peer": user, "code": code, "brisque": None, "psnr": None,
                       "ssim": None, "vmaf": None, "delay_ms": None, "frozen": frozen}
                if rgb is not None:
                    rec["brisque"] = _round(brisque.score(rgb, layout))
                    scores = fullref.compare(rgb, self.media) if code is not None else None
                    if scores:
                        rec["psnr"], rec["ssim"] = _round(scores.psnr), _round(scores.ssim, 4)
                    if i == 0:
                        from PIL import Image
                        Image.fromarray(rgb).save(self.frames_dir / f"w{window}-{p_id}-{user}.png")
                if code is not None and i < len(own) and own[i][1] is not None:
                    skew_ms = (own[i][0] - t) * 1000.0  # sender drawn later -> it shows later frames
                    rec["delay_ms"] = round(delay.delay_ms(own[i][1], code, loop, fps) - skew_ms, 1)
                runner.run.append("quality", rec)


def _round(v, digits: int = 2):
    return None if v is None else round(float(v), digits)
