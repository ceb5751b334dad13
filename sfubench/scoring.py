"""Received-video quality in two stages, so that measuring does not disturb what is measured.

During the run, for the length of every measurement, the page reads the frame code of every
frame each received video displays (playback.jsonl: freezes, skipped frames, effective frame
rate); at its end `Scorer.capture` grabs every video, keeps the frames of the
received ones as PNG in frames/ (PNG: JPEG would shift BRISQUE), and appends to frames/index.jsonl
what is cheap and needs the live moment: the frame code (0.1 ms), glass-to-glass delay and whether
the video froze. After the run, once the browsers are gone, `score_frames` adds BRISQUE and
PSNR/SSIM/VMAF against the source frame each code names, and writes quality.jsonl. On a 2-core
machine the scoring's CPU would otherwise be taken from the browsers in the middle of a window. A
crashed run keeps its frames and index; `sfubench report` scores them.

Delay: each capture call draws every participant's own preview and the remotes it receives in one
JS turn, each draw with its own timestamp, so a sender's preview and a receiver's copy of it are
compared on one clock, and the time between the two draws is taken out. All browsers of the local
lab share this machine's clock; across machines that needs synchronised clocks (NTP).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from PIL import Image

from quality import brisque, delay, framecode, fullref

from .runner import decode_png

FROZEN_SPAN = delay.FREEZE_S
INDEX = "index.jsonl"


class Scorer:
    def __init__(self, media, frames_dir: Path, captures: int):
        self.media = media
        self.frames_dir = frames_dir
        self.captures = captures
        self.gap = FROZEN_SPAN / max(1, captures - 1) + 0.05

    def follow(self, runner) -> None:
        """Starts the per-frame code sampler of every received video not followed yet, and drops
        what the samplers gathered so far: a measurement counts only its own frames."""
        lay = self.media.layout
        code = {"width": lay.width, "height": lay.height, "cell": lay.cell,
                "cells": framecode.CELLS, "rows": framecode.ROWS}
        for browser in runner.browsers:
            browser.attempt(runner, "follow", browser.call,
                            "sfubenchHost.follow(arguments[0]); sfubenchHost.drain()", code)

    def playback(self, runner, phase: str, window: int) -> None:
        """Freezes, skipped frames and effective frame rate of every received video, from the code
        of each frame it received since follow()."""
        room_of = {p.id: p.room for p in runner.participants}
        for browser in runner.browsers:
            drained = browser.attempt(runner, "drain", browser.call,
                                      "return sfubenchHost.drain()") or {}
            for p_id, videos in drained.items():
                for peer, samples in videos.items():
                    # The least-delayed read puts the frames' own clock on the epoch.
                    offset = min((read - ts for read, ts, _ in samples), default=0.0)
                    codes = [((ts + offset) / 1000.0, framecode.decode_levels(levels, self.media.layout))
                             for _, ts, levels in samples]
                    pb = delay.playback(codes, self.media.frames)
                    runner.run.append("playback", {
                        "phase": phase, "window": window,
                        "participants": runner.status.participants, "room": room_of[p_id],
                        "user": p_id, "peer": peer, "frames": len(codes),
                        "decoded": sum(c is not None for _, c in codes),
                        "duration": round(pb.duration, 3), "shown": pb.shown,
                        "effective_fps": round(pb.effective_fps, 2), "skipped": pb.skipped,
                        "backwards": pb.backwards, "freezes": pb.freezes,
                        "freeze_s": round(pb.freeze_s, 3),
                        "longest_freeze_s": round(pb.longest_freeze_s, 3)})

    def capture(self, runner, phase: str, window: int) -> None:
        self.playback(runner, phase, window)
        series: dict[tuple[str, str], list[tuple[float, object]]] = {}
        for i in range(self.captures):
            for browser in runner.browsers:
                requests = {p.id: [q.id for q in runner.participants if q.room == p.room]
                            for p in browser.participants}
                shots = browser.attempt(runner, "capture", browser.capture, requests) or {}
                for key, shot in shots.items():
                    series.setdefault(key, []).append(shot)
            if i < self.captures - 1:
                time.sleep(self.gap)  # a background sample here would stretch the gap
        self.frames_dir.mkdir(parents=True, exist_ok=True)
        layout, loop, fps = self.media.layout, self.media.frames, self.media.fps
        decoded = {key: [(t, decode_png(url)) for t, url in shots] for key, shots in series.items()}
        codes = {key: [(t, framecode.decode(rgb, layout) if rgb is not None else None)
                       for t, rgb in shots] for key, shots in decoded.items()}
        room_of = {p.id: p.room for p in runner.participants}
        with open(self.frames_dir / INDEX, "a") as index:
            for (p_id, user), shots in decoded.items():
                if user == p_id:
                    continue   # a participant's own preview is the reference for the others' delay
                own = codes.get((user, user), [])
                seen = [c for _, c in codes[(p_id, user)] if c is not None]
                span = shots[-1][0] - shots[0][0] if shots else 0
                frozen = len(seen) == len(shots) >= 2 and len(set(seen)) == 1 and span >= FROZEN_SPAN
                for i, ((t, rgb), (_, code)) in enumerate(zip(shots, codes[(p_id, user)])):
                    rec = {"t": int(t * 1000), "phase": phase, "window": window,
                           "participants": runner.status.participants, "room": room_of[p_id],
                           "user": p_id, "peer": user, "code": code, "delay_ms": None,
                           "frozen": frozen, "frame": None}
                    if rgb is not None:
                        rec["frame"] = f"w{window}-{p_id}-{user}-{i}.png"
                        Image.fromarray(rgb).save(self.frames_dir / rec["frame"])
                    if code is not None and i < len(own) and own[i][1] is not None:
                        skew_ms = (own[i][0] - t) * 1000.0  # sender drawn later: later frames
                        rec["delay_ms"] = round(delay.delay_ms(own[i][1], code, loop, fps) - skew_ms, 1)
                    index.write(json.dumps(rec, separators=(",", ":")) + "\n")


def score_frames(run_path: Path, media, progress=None) -> int:
    """Scores every frame listed in frames/index.jsonl into quality.jsonl; returns the count."""
    from .rundir import read

    frames_dir = run_path / "frames"
    records = read(frames_dir, INDEX.removesuffix(".jsonl"))
    if not records:
        return 0
    if progress:
        progress.say(f"quality: scoring {len(records)} received frames (BRISQUE, PSNR/SSIM, VMAF)")
    layout = media.layout
    vmaf_batch = []   # (record, frame) pairs VMAF rates in one ffmpeg run
    for rec in records:
        rec.update(brisque=None, psnr=None, ssim=None, vmaf=None)
        if not rec.get("frame"):
            continue
        rgb = np.asarray(Image.open(frames_dir / rec["frame"]).convert("RGB"))
        rec["brisque"] = _round(brisque.score(rgb, layout))
        scores = fullref.compare(rgb, media) if rec["code"] is not None else None
        if scores:
            rec["psnr"], rec["ssim"] = _round(scores.psnr), _round(scores.ssim, 4)
            vmaf_batch.append((rec, rgb))
    if vmaf_batch:
        # VMAF needs the registry wheel's ffmpeg (Debian's has no libvmaf).
        try:
            vmafs = fullref.vmaf_by_code([f for _, f in vmaf_batch], media)
        except (RuntimeError, OSError) as e:
            if progress:
                progress.say(f"quality: VMAF not measured: {e}")
            vmafs = [None] * len(vmaf_batch)
        for (rec, _), v in zip(vmaf_batch, vmafs):
            rec["vmaf"] = _round(v)
    tmp = run_path / "quality.jsonl.tmp"
    with open(tmp, "w") as out:
        for rec in records:
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")
    tmp.replace(run_path / "quality.jsonl")
    return len(records)


def _round(v, digits: int = 2):
    return None if v is None else round(float(v), digits)
