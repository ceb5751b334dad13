"""Is a received <video> playing, blank or frozen? Judged from frames captured at its native size.

Unlike the published KITE check this looks at the real frame size (not a 300x150 default canvas),
keeps width and height the right way round, and reads RGB only (alpha, if given, is dropped), so a
black picture is 'blank' and not mistaken for a frozen one.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from quality import framecode
from quality.framecode import Layout

MIN_SPAN = 0.5  # s; a picture unchanged for this long is frozen
# Luma standard deviation below which a picture carries nothing: a black or grey fill stays
# under 1 even after a codec, natural footage is far above.
BLANK_STD = 4.0
# Mean absolute luma difference on a thumbnail below which two pictures are the same; a
# re-rendered identical frame differs by 0, natural footage half a second apart by several levels.
SAME_DIFF = 0.5
THUMB = (64, 36)

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _luma_grid(rgb: np.ndarray) -> np.ndarray:
    # Every 4th pixel is plenty to tell a uniform fill from a picture.
    return rgb[::4, ::4, :3].astype(np.float32) @ _LUMA


def is_blank(rgb: np.ndarray) -> bool:
    """True for an empty or (nearly) uniform picture, whatever its level."""
    return rgb.size == 0 or float(_luma_grid(rgb).std()) < BLANK_STD


def _thumb(rgb: np.ndarray) -> np.ndarray:
    gray = cv2.cvtColor(np.ascontiguousarray(rgb[..., :3]), cv2.COLOR_RGB2GRAY)
    return cv2.resize(gray, THUMB, interpolation=cv2.INTER_AREA).astype(np.float32)


def classify(frames: Sequence[tuple[float, np.ndarray]], layout: Layout | None = None) -> str:
    """'playing', 'blank' or 'frozen' for (time_s, HxWx3 uint8 RGB) captures of one video.

    Judges what the video shows now: 'blank' if the latest capture is blank; 'frozen' if the
    picture has not changed for the last MIN_SPAN s or more of the captures. Two captures are the
    same picture when their frame codes (with `layout`) decode equal; when either does not decode,
    their pixels decide. Needs at least two captures spanning MIN_SPAN s.
    """
    if len(frames) < 2:
        raise ValueError("the check needs at least two captures")
    ordered = sorted(frames, key=lambda f: f[0])
    span = ordered[-1][0] - ordered[0][0]
    if span < MIN_SPAN:
        raise ValueError(f"captures span {span:.3f} s, the check needs {MIN_SPAN} s")
    last_t, last = ordered[-1]
    if is_blank(last):
        return "blank"
    last_code = framecode.decode(last, layout) if layout else None
    last_thumb = None
    since = last_t
    for t, rgb in reversed(ordered[:-1]):
        code = framecode.decode(rgb, layout) if layout else None
        if code is not None and last_code is not None:
            same = code == last_code
        else:
            if last_thumb is None:
                last_thumb = _thumb(last)
            thumb = _thumb(rgb)
            same = float(np.abs(thumb - last_thumb).mean()) < SAME_DIFF
        if not same:
            break
        since = t
    return "frozen" if last_t - since >= MIN_SPAN else "playing"
