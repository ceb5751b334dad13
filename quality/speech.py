"""What a recording of the microphone's speech scores: placed in the loop by its audio codes
(quality/audiocode.py), set against the reference it should be, and scored full-reference with
ViSQOL v3 in speech mode (visqol-python, its polynomial mapper) and, where it installed, PESQ
wideband (ITU-T P.862.2); and the delay from a marker's sending to its hearing.

Both scorers want 16 kHz: the reference and the recording are resampled to it (polyphase, scipy).
"""
from __future__ import annotations

from fractions import Fraction
from importlib import metadata

import numpy as np

from . import audiocode

SCORING_RATE = 16_000


def resample(pcm: np.ndarray, rate: int, to: int = SCORING_RATE) -> np.ndarray:
    from scipy.signal import resample_poly   # here: the reports import this module, and need no SciPy

    if rate == to:
        return np.asarray(pcm, dtype=np.float64)
    f = Fraction(to, rate)
    return resample_poly(np.asarray(pcm, dtype=np.float64), f.numerator, f.denominator)


def place(recording: np.ndarray, rate: int, marks: tuple[int, ...], loop: int, loop_rate: int) -> float | None:
    """Where in the loop (s) the recording's first sample is, from the first audio code it holds;
    None when it holds none. `marks`: the codes' onsets in the loop (samples at `loop_rate`), `loop`:
    the loop's length in those samples."""
    for t, number in audiocode.find(recording, rate):
        if number < len(marks):
            return (marks[number] / loop_rate - t) % (loop / loop_rate)
    return None


def reference(loop: np.ndarray, loop_rate: int, start_s: float, seconds: float, rate: int) -> np.ndarray:
    """`seconds` of the looped reference from `start_s` in the loop, at `rate`."""
    first = int(round(start_s * loop_rate)) % len(loop)
    n = int(round(seconds * loop_rate))
    return resample(np.resize(np.roll(loop, -first), n), loop_rate, rate)


class Scorer:
    """The full-reference scores of a recording against its reference, both 16 kHz mono floats."""

    def __init__(self):
        from visqol import VisqolApi
        self._visqol = VisqolApi()
        self._visqol.create(mode="speech", use_lattice_model=False)
        try:
            from pesq import pesq
            self._pesq = pesq
        except ImportError:   # an sdist that needs a compiler: scored without it where it did not build
            self._pesq = None

    @staticmethod
    def versions() -> dict:
        out = {"visqol": f"visqol-python {metadata.version('visqol-python')} (ViSQOL v3, speech mode, polynomial mapper)"}
        try:
            out["pesq"] = f"pesq {metadata.version('pesq')} (ITU-T P.862.2, wideband)"
        except metadata.PackageNotFoundError:
            out["pesq"] = None
        return out

    def score(self, ref: np.ndarray, deg: np.ndarray) -> dict:
        n = min(len(ref), len(deg))
        ref, deg = ref[:n], deg[:n]
        out = {"visqol": float(self._visqol.measure_from_arrays(ref, deg, SCORING_RATE).moslqo), "pesq": None}
        if self._pesq is not None:
            try:
                out["pesq"] = float(self._pesq(SCORING_RATE, ref, deg, "wb"))
            except Exception:   # PESQ refuses a recording it finds no utterance in: no score, not a failure
                out["pesq"] = None
        return out


def delays_ms(heard: list[tuple[float, int]], sent: list[tuple[float, int]], loop_s: float) -> list[float]:
    """Mouth-to-ear delay of every marker a receiver heard: its time (epoch s) less the time the same
    marker was sent (the sender's own recording of its microphone), the latest sending before it
    within a loop, so a delay longer than the gap between markers is read right."""
    out = []
    for t, number in heard:
        before = [s for s, k in sent if k == number and 0 <= t - s < loop_s]
        if before:
            out.append(1000.0 * (t - max(before)))
    return out
