"""The after-run quality scores, so that scoring never takes CPU from the browsers mid-measurement:
of received frames (score_frames) and of received speech (score_speech).

During the run the pages encode a few received frames as PNG after each measurement (the collector
keeps them in frames/ and lists them in frames/index.jsonl with the code each shows); once the
browsers are gone, `score_frames` adds BRISQUE (no reference, as the study's NARVAL) and PSNR, SSIM
and VMAF against the source frame each code names (VMAF also at the frame's own size, the quality of
the simulcast layer it came from), and writes quality.jsonl. A crashed run keeps
its frames and index; `sfubench report` scores them.
"""
from __future__ import annotations

import functools
import json
import multiprocessing
import os
import wave
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from quality import audiocode, brisque, fullref, speech

INDEX = "index.jsonl"


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
        rec.update(brisque=None, psnr=None, ssim=None, vmaf=None, vmaf_layer=None)
        if not rec.get("frame"):
            continue
        rgb = np.asarray(Image.open(frames_dir / rec["frame"]).convert("RGB"))
        rec["width"], rec["height"] = rgb.shape[1], rgb.shape[0]
        rec["brisque"] = _round(brisque.score(rgb, layout))
        scores = fullref.compare(rgb, media) if rec["code"] is not None else None
        if scores:
            rec["psnr"], rec["ssim"] = _round(scores.psnr), _round(scores.ssim, 4)
            vmaf_batch.append((rec, rgb))
    if vmaf_batch:
        # VMAF needs the registry wheel's ffmpeg (Debian's has no libvmaf).
        frames = [f for _, f in vmaf_batch]
        # a frame at the source's size is its own layer's: only smaller ones need a second score
        smaller = [i for i, f in enumerate(frames) if f.shape[:2] != (layout.height, layout.width)]
        try:
            vmafs = fullref.vmaf_by_code(frames, media)
            at_size = list(vmafs)
            own = fullref.vmaf_by_code([frames[i] for i in smaller], media, at_received_size=True)
            for i, v in zip(smaller, own):
                at_size[i] = v
        except (RuntimeError, OSError) as e:
            if progress:
                progress.say(f"quality: VMAF not measured: {e}")
            vmafs = at_size = [None] * len(vmaf_batch)
        for (rec, _), v, own in zip(vmaf_batch, vmafs, at_size):
            rec["vmaf"], rec["vmaf_layer"] = _round(v), _round(own)
    _write_whole(run_path / "quality.jsonl", records)
    return len(records)


def score_speech(run_path: Path, media, progress=None) -> int:
    """Scores every recording of what a browser heard (audio/index.jsonl) into speech.jsonl: placed
    in the microphone's loop by its audio codes, ViSQOL and PESQ against the speech it should be
    (quality/speech.py), and the mouth-to-ear delay of each code it holds against the sender's own
    recording of its microphone in the same window. Returns the count."""
    from .rundir import read

    records = read(run_path / "audio", "index")
    heard = [r for r in records if r.get("peer") != r.get("user")]
    if not heard:
        return 0
    if progress:
        progress.say(f"audio: scoring {len(heard)} recordings of what participants heard (ViSQOL, PESQ, delay)")
    loop = _wav(media.wav)[0]
    sent = {}
    for r in records:
        if r.get("peer") == r.get("user"):
            pcm, rate = _wav(run_path / "audio" / r["file"])
            sent[(r["window"], r["user"])] = [(r["t"] / 1000 + t, k) for t, k in audiocode.find(pcm, rate)]
    jobs = [(r, sent.get((r["window"], r["peer"]), [])) for r in heard]
    score = functools.partial(_heard, run_path, media, loop)
    # ViSQOL takes seconds a recording, one core each: after the run both cores are free for it
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers < 2:
        rows = [score(job) for job in jobs]
    else:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(score, jobs))
    _write_whole(run_path / "speech.jsonl", rows)
    return len(rows)


def _heard(run_path: Path, media, loop: np.ndarray, job: tuple[dict, list]) -> dict:
    """One recording's row of speech.jsonl: `job` is its index record and the codes its sender's
    microphone sent in the same window."""
    from .media import AUDIO_RATE

    r, sent = job
    pcm, rate = _wav(run_path / "audio" / r["file"])
    row = {k: r.get(k) for k in ("t", "phase", "window", "participants", "room", "user", "peer")}
    row.update(visqol=None, pesq=None, mouth_to_ear_ms=None, codes=0)
    at = speech.place(pcm, rate, media.marks, len(loop), AUDIO_RATE)
    if at is not None:
        ref = speech.reference(loop, AUDIO_RATE, at, len(pcm) / rate, speech.SCORING_RATE)
        row.update({k: _round(v, 3) for k, v in _scorer().score(ref, speech.resample(pcm, rate)).items()})
    codes = [(r["t"] / 1000 + t, k) for t, k in audiocode.find(pcm, rate)]
    delays = speech.delays_ms(codes, sent, len(loop) / AUDIO_RATE)
    row.update(codes=len(codes), mouth_to_ear_ms=_round(float(np.median(delays)), 1) if delays else None)
    return row


@functools.cache
def _scorer() -> speech.Scorer:
    """One per process: its models load once."""
    return speech.Scorer()


def _write_whole(path: Path, records: list[dict]) -> None:
    """Scores as JSON lines, written then renamed: the file is whole or absent (a crash mid-write
    leaves the recordings to score again)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as out:
        for rec in records:
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")
    tmp.replace(path)


def _wav(path: Path) -> tuple[np.ndarray, int]:
    """A 16-bit mono WAV's samples as floats, and its rate."""
    with wave.open(str(path)) as f:
        return np.frombuffer(f.readframes(f.getnframes()), "<i2") / 32768.0, f.getframerate()


def _round(v, digits: int = 2):
    return None if v is None else round(float(v), digits)
