"""CPU cost of the quality measures at the study's 540x360, in frames per second per core.

Run: .venv/bin/python bench/quality.py   (not a test: numbers depend on the machine and its load)
"""

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# `quality` package: put the repository there instead.
ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from quality import brisque, check, framecode, fullref  # noqa: E402
from sfubench import media as media_mod  # noqa: E402
from sfubench.config import cache_root  # noqa: E402

TARGETS = {"frame code decode": 2000, "BRISQUE": 75}


def received_frames(media, kbps=300, count=60):
    """Frames as a receiver decodes them: the clip through real-time VP8."""
    enc = subprocess.run(
        [media_mod.FFMPEG, "-v", "error", "-nostdin", "-i", str(media.y4m), "-frames:v", str(count),
         "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", f"{kbps}k",
         "-threads", "1", "-f", "ivf", "-"], capture_output=True, check=True).stdout
    raw = subprocess.run(
        [media_mod.FFMPEG, "-v", "error", "-nostdin", "-f", "ivf", "-i", "-", "-f", "rawvideo",
         "-pix_fmt", "rgb24", "-"], input=enc, capture_output=True, check=True).stdout
    return list(np.frombuffer(raw, np.uint8).reshape(-1, media.height, media.width, 3))


def rate(fn, items, min_cpu=1.0):
    """Items per CPU second (this process and its children), repeating until `min_cpu` s."""
    def cpu():
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime

    done, start = 0, cpu()
    while True:
        done += fn(items)
        spent = cpu() - start
        if spent >= min_cpu:
            return done / spent


def main():
    cv2.setNumThreads(1)  # per core: the scorer shares the machine with the browsers
    cache = cache_root()
    media = media_mod.build("paper", cache)
    layout = media.layout
    frames = received_frames(media)
    print(f"{len(frames)} frames at {media.width}x{media.height}, VP8 300 kbps; cache {cache}")

    def decode(items):
        for f in items:
            framecode.decode(f, layout)
        return len(items)

    def as_samples(items, with_codes):
        """What the page's sampler posts of each frame (sfubench/web/sampler.js): its code where it
        reads one, and a row of picture points below the code band; taken before the clock runs."""
        row, step = layout.picture_top + 8, max(1, media.width // 16)

        def points(f):
            return [int(v) for v in f[row, ::step, :].mean(axis=1)[:16]]
        return [(i / media.fps, framecode.decode(f, layout) if with_codes else None, points(f))
                for i, f in enumerate(items)]

    def checks_over(samples):
        # One check classifies a video from the frames of its last half second; count them.
        span = int(media.fps // 2) + 1
        for end in range(span, len(samples) + 1):
            check.classify(samples[end - span:end], samples[end - 1][0])
        return span * (len(samples) - span + 1)

    coded, uncoded = as_samples(frames, True), as_samples(frames, False)

    def video_check(_):
        return checks_over(coded)

    def video_check_pixels(_):
        return checks_over(uncoded)

    def brisque_score(items):
        for f in items:
            brisque.score(f, layout)
        return len(items)

    def psnr_ssim(items):
        for f in items:
            fullref.compare(f, media)
        return len(items)

    def vmaf(items):
        fullref.vmaf_by_code(items, media)
        return len(items)

    rows = [
        ("frame code decode", decode),
        ("video check (codes)", video_check),
        ("video check (pixels only)", video_check_pixels),
        ("BRISQUE", brisque_score),
        ("PSNR + SSIM", psnr_ssim),
        ("VMAF (by code, ffmpeg)", vmaf),
    ]
    print(f"{'measure':28s} {'frames/s/core':>14s}  target")
    for name, fn in rows:
        r = rate(fn, frames[:20] if name.startswith("VMAF") else frames)
        target = TARGETS.get(name)
        verdict = "" if target is None else f">= {target}  {'ok' if r >= target else 'BELOW'}"
        print(f"{name:28s} {r:14.0f}  {verdict}", flush=True)
    print(f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
