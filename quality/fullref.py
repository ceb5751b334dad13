"""Full-reference scores of a received frame against the source frame its frame code names.

PSNR and SSIM are computed here on luma; VMAF runs in the static ffmpeg of the imageio-ffmpeg wheel,
the one build at hand with libvmaf and its built-in vmaf_v0.6.1 model. Frames are always paired by
their decoded code, never by timestamps, which the network and the browser shift.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import cv2
import imageio_ffmpeg
import numpy as np

from quality import framecode
from quality.framecode import Layout

# Identical pictures have infinite PSNR, which JSON cannot carry: report a ceiling instead.
MAX_PSNR = 100.0

_LUMA = np.array([0.299, 0.587, 0.114])


class Source(Protocol):
    """What `sfubench.media.Media` offers: the code layout and the source frames by number."""

    layout: Layout

    def frame(self, number: int) -> np.ndarray: ...


@dataclasses.dataclass(frozen=True)
class Scores:
    code: int
    psnr: float
    ssim: float


def _aligned(received: np.ndarray, source: np.ndarray, layout: Layout | None):
    """Both frames at the source size, cut to the picture area when the code layout is known."""
    received = framecode.rescale(received, source.shape[1], source.shape[0])
    if layout:
        received = framecode.picture_area(received, layout)
        source = framecode.picture_area(source, layout)
    return received, source


def _luma(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(np.float64) @ _LUMA


def psnr(received: np.ndarray, source: np.ndarray, layout: Layout | None = None) -> float:
    """Luma PSNR in dB, the received frame rescaled to the source's size first."""
    a, b = _aligned(received, source, layout)
    mse = float(np.mean((_luma(a) - _luma(b)) ** 2))
    return MAX_PSNR if mse == 0 else min(MAX_PSNR, 10 * math.log10(255.0**2 / mse))


def ssim(received: np.ndarray, source: np.ndarray, layout: Layout | None = None) -> float:
    """Luma SSIM (Wang et al. 2004: 11x11 Gaussian window, sigma 1.5), over the valid region."""
    a, b = _aligned(received, source, layout)
    x, y = _luma(a), _luma(b)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(img):
        return cv2.GaussianBlur(img, (11, 11), 1.5)[5:-5, 5:-5]

    mx, my = blur(x), blur(y)
    vx = blur(x * x) - mx * mx
    vy = blur(y * y) - my * my
    cxy = blur(x * y) - mx * my
    ssim_map = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(ssim_map.mean())


def compare(received: np.ndarray, source: Source) -> Scores | None:
    """PSNR and SSIM against the source frame named by the received frame's code; None when the
    code does not decode, since any other pairing would score the wrong frame."""
    code = framecode.decode(received, source.layout)
    if code is None:
        return None
    ref = source.frame(code)
    return Scores(code=code, psnr=psnr(received, ref, source.layout),
                  ssim=ssim(received, ref, source.layout))


def vmaf(pairs: Sequence[tuple[np.ndarray, np.ndarray]], layout: Layout | None = None,
         threads: int = 1) -> list[float]:
    """VMAF (vmaf_v0.6.1) of each (received, source) pair of a sequence, in order. VMAF's motion
    feature compares consecutive source frames, so the pairs must follow each other in time as in
    a clip; for scattered captures use `vmaf_by_code`. One ffmpeg run for the batch; both inputs are
    renumbered frame by frame (settb=1/30,setpts=N) so pair i meets pair i."""
    if not pairs:
        return []
    aligned = [_aligned(r, s, layout) for r, s in pairs]
    h, w = aligned[0][1].shape[:2]
    h -= h % 2  # 4:2:0 needs even sizes
    w -= w % 2
    with tempfile.TemporaryDirectory(prefix="sfubench-vmaf-") as tmp:
        dist, ref, log = Path(tmp, "dist.rgb"), Path(tmp, "ref.rgb"), Path(tmp, "vmaf.json")
        with open(dist, "wb") as fd, open(ref, "wb") as fr:
            for r, s in aligned:
                fd.write(np.ascontiguousarray(r[:h, :w]).tobytes())
                fr.write(np.ascontiguousarray(s[:h, :w]).tobytes())
        raw = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-framerate", "30"]
        graph = (
            "[0:v]settb=1/30,setpts=N,format=yuv420p[d];"
            "[1:v]settb=1/30,setpts=N,format=yuv420p[r];"
            f"[d][r]libvmaf=log_fmt=json:log_path={log}:n_threads={threads}"
        )
        cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-nostdin", *raw, "-i", str(dist),
               *raw, "-i", str(ref), "-lavfi", graph, "-f", "null", "-"]
        proc = subprocess.run(cmd, capture_output=True)
        if proc.returncode != 0:
            raise RuntimeError(f"VMAF failed: {proc.stderr.decode(errors='replace').strip()}")
        frames = json.loads(log.read_text())["frames"]
    scores = {f["frameNum"]: f["metrics"]["vmaf"] for f in frames}
    if len(scores) != len(pairs):
        raise RuntimeError(f"VMAF scored {len(scores)} of {len(pairs)} frames")
    return [float(scores[i]) for i in range(len(pairs))]


def vmaf_by_code(received: Sequence[np.ndarray], source: Source, threads: int = 1,
                 at_received_size: bool = False) -> list[float | None]:
    """VMAF of each received frame against the source frame its code names; None where the code
    does not decode. Captures are scattered in time, so each is scored between its source
    neighbours (loop positions n-1 and n+1, which pass unchanged): VMAF's motion feature then sees
    the clip's real motion, not the jump between two unrelated captures.

    By default a received frame is scaled up to the source's size, as a viewer's tile shows it;
    `at_received_size` scales the source down to the received frame's size instead, the quality of
    a simulcast layer as sent, not the detail its lower resolution costs. One ffmpeg run per size."""
    codes = [framecode.decode(r, source.layout) for r in received]
    loop = source.layout.frames
    batches: dict[tuple | None, list[int]] = {}
    for i, (r, c) in enumerate(zip(received, codes)):
        if c is not None:
            batches.setdefault(r.shape[:2] if at_received_size else None, []).append(i)
    scores: list[float | None] = [None] * len(received)
    for size, indices in batches.items():
        def ref(n: int) -> np.ndarray:
            frame = source.frame(n % loop)
            return frame if size is None else framecode.rescale(frame, size[1], size[0])
        pairs = []
        for i in indices:
            before, after = ref(codes[i] - 1), ref(codes[i] + 1)
            pairs += [(before, before), (received[i], ref(codes[i])), (after, after)]
        for i, score in zip(indices, vmaf(pairs, source.layout, threads)[1::3]):
            scores[i] = score
    return scores
