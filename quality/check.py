"""Is a received video playing, blank or frozen? Judged from what the page's frame sampler reads off
every frame the video delivers (sfubench/web/sampler.js): the frame code, and a row of picture
points for frames whose code cannot be read.

Unlike the published KITE check this needs no screenshot round trip: it sees every delivered frame,
so a video that stalls between two screenshots cannot pass for playing, and a blank picture (no code,
a uniform row of points) is not mistaken for a frozen one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_SPAN = 0.5  # s; a picture unchanged for this long is frozen
# Frames reach the engine in half-second batches: a video whose newest frame is older than this has
# stopped delivering.
STALE_S = 1.5
# Luma standard deviation below which a picture carries nothing: a black or grey fill stays
# under 1 even after a codec, natural footage is far above.
BLANK_STD = 4.0
# Mean absolute difference of the picture points below which two frames show the same picture: a
# re-sent identical frame differs by 0, footage a frame apart by several levels.
SAME_DIFF = 0.5

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def is_blank(rgb: np.ndarray) -> bool:
    """True for an empty or (nearly) uniform RGB picture, whatever its level."""
    return rgb.size == 0 or float((rgb[::4, ::4, :3].astype(np.float32) @ _LUMA).std()) < BLANK_STD


def _blank_points(points) -> bool:
    return points is None or len(points) == 0 or float(np.std(points)) < BLANK_STD


def _same(a: tuple, b: tuple) -> bool:
    """Two frames (t, code, picture points) show the same picture: by code where both decode, else
    by their picture points."""
    if a[1] is not None and b[1] is not None:
        return a[1] == b[1]
    if a[2] is None or b[2] is None:
        return False
    return float(np.abs(np.asarray(a[2], np.float32) - np.asarray(b[2], np.float32)).mean()) < SAME_DIFF


def classify(frames: Sequence[tuple[float, int | None, Sequence[float] | None]], now: float) -> str:
    """'playing', 'blank', 'frozen' or 'missing' for one video at time `now` (s), from its delivered
    frames as (time s, decoded code or None, picture points or None), in time order.

    missing: no frame ever; frozen: frames stopped coming (none for STALE_S), or the newest picture
    has been shown for MIN_SPAN or more; blank: the newest frame has no readable code and a uniform
    picture; playing: otherwise, once the picture is seen to change."""
    if not frames:
        return "missing"
    last = frames[-1]
    if now - last[0] > STALE_S:
        return "frozen"
    if last[1] is None and _blank_points(last[2]):
        return "blank"
    since = last[0]
    changed = False
    for f in reversed(frames[:-1]):
        if not _same(f, last):
            changed = True
            break
        since = f[0]
    if last[0] - since >= MIN_SPAN:
        return "frozen"
    return "playing" if changed else "frozen"
