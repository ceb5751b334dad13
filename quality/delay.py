"""Glass-to-glass delay and playback statistics from frame codes. Pure functions over numbers.

Codes are loop positions 0..loop-1 of a clip played at `fps`; the clip loops, so every difference
between codes is taken modulo the loop length.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable

FREEZE_S = 0.5  # s; the same code shown at least this long is a freeze
MATCH_SLACK_S = 0.1


def frames_between(earlier: int, later: int, loop: int) -> int:
    """How many frames `later` is ahead of `earlier`, in (-loop/2, loop/2]: the clip loops, and
    any real gap is assumed shorter than half a loop."""
    d = (later - earlier) % loop
    return d - loop if d > loop // 2 else d


def delays_ms(received: Iterable[tuple[float, int | None]], sent: Iterable[tuple[float, int | None]],
              loop: int, fps: float) -> list[float]:
    """Glass-to-glass delay of each received frame, in ms: from the instant the sender's camera
    captured its code to the instant the receiver renders it, both (time s, code) on one clock.
    The clip loops, so a code matches the sender's latest capture of it up to the render (half a
    loop at most); frames whose capture is not in `sent` are left out. A receiver's render time is
    its own estimate (capture time carried by RTP plus its playout delay), so over a loopback it can
    come out a few ms before the capture: captures up to MATCH_SLACK_S after the render still match,
    and the delay is then reported as measured, a little below zero."""
    captured: dict[int, list[float]] = {}
    for t, code in sorted((t, c) for t, c in sent if c is not None):
        captured.setdefault(code, []).append(t)
    horizon = loop / fps / 2
    out = []
    for t, code in received:
        times = captured.get(code) if code is not None else None
        if not times:
            continue
        i = bisect.bisect_right(times, t + MATCH_SLACK_S)
        if i and t - times[i - 1] < horizon:
            out.append((t - times[i - 1]) * 1000.0)
    return out


@dataclasses.dataclass(frozen=True)
class Playback:
    duration: float  # s from the first to the last decoded capture
    shown: int  # distinct frames seen (runs of one code)
    effective_fps: float  # frame changes per second seen
    skipped: int  # source frames never seen between two shown ones
    backwards: int  # changes to an earlier code (reordering, or a loop mix-up)
    freezes: int  # runs of one code lasting at least the freeze threshold
    freeze_s: float  # their total duration
    longest_freeze_s: float


def playback(series: Iterable[tuple[float, int | None]], loop: int,
             freeze_s: float = FREEZE_S, span: float | None = None) -> Playback:
    """Statistics of one received video from its (time_s, code) series, one entry per sampled
    frame; undecoded samples (code None) are left out. A run lasts from its first sample to the
    first sample of the next code (to the last sample, for the final run). Skipped frames and the
    effective frame rate are only meaningful when the series samples every displayed frame (e.g.
    requestVideoFrameCallback); sparser sampling reads as skipping. `span`: the seconds the frames
    were awaited (a measurement window's): the effective frame rate is over it, so a stalled
    stream that delivers its backlog in a burst counts the frames it showed, not the burst's rate."""
    points = sorted((t, c) for t, c in series if c is not None)
    if not points:
        return Playback(0.0, 0, 0.0, 0, 0, 0, 0.0, 0.0)
    runs: list[tuple[float, int]] = []  # (start, code)
    for t, c in points:
        if not runs or runs[-1][1] != c:
            runs.append((t, c))
    ends = [start for start, _ in runs[1:]] + [points[-1][0]]
    lengths = [end - start for (start, _), end in zip(runs, ends)]
    frozen = [d for d in lengths if d >= freeze_s]
    steps = [frames_between(a, b, loop) for (_, a), (_, b) in zip(runs, runs[1:])]
    duration = points[-1][0] - points[0][0]
    return Playback(
        duration=duration,
        shown=len(runs),
        effective_fps=(len(runs) / span if span else (len(runs) - 1) / duration if duration > 0 else 0.0),
        skipped=sum(s - 1 for s in steps if s > 0),
        backwards=sum(1 for s in steps if s < 0),
        freezes=len(frozen),
        freeze_s=sum(frozen),
        longest_freeze_s=max(frozen, default=0.0),
    )
