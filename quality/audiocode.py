"""Audio codes: markers in the microphone's speech that a recording of it is aligned by, as frame
codes align video. A marker is three tones of SYMBOL_S each, every tone one of eight frequencies:
the first two give its number (0-63), the third a check of them. Markers sit in the pauses between
sentences, each number once over the loop, so a recording holding one is placed in the loop without
guessing, and a delay longer than a second (or than the gap between markers) is read right.

Tones in the speech band survive Opus at WebRTC's bitrates, and a marker in a pause is read through
the loss and concealment of a degraded link (a symbol a concealed packet smeared fails its check,
and that marker is not read rather than misread). Both the reference and what a receiver recorded
carry the markers, so a full-reference score compares like with like.
"""
from __future__ import annotations

import numpy as np

FREQS = (700.0, 900.0, 1100.0, 1300.0, 1500.0, 1700.0, 1900.0, 2100.0)   # Hz
SYMBOL_S = 0.040
RAMP_S = 0.005            # each tone fades in and out: no click a codec would spread
LEVEL = 0.3               # of full scale: below the speech's peaks
NUMBERS = len(FREQS) ** 2
MARK_S = 3 * SYMBOL_S
HOP_S = 0.005             # the reader's step
DOMINANT = 0.6            # of the band's power in one tone: a symbol


def check(number: int) -> int:
    """The third symbol of marker `number`: a change of either of the first two changes it."""
    return (number // 8 + 3 * (number % 8) + 5) % 8


def symbols(number: int) -> tuple[int, int, int]:
    if not 0 <= number < NUMBERS:
        raise ValueError(f"a marker's number is 0-{NUMBERS - 1}, not {number}")
    return number // 8, number % 8, check(number)


def marker(number: int, rate: int) -> np.ndarray:
    """Marker `number` as samples at `rate`, float in [-LEVEL, LEVEL]."""
    n, ramp = round(SYMBOL_S * rate), round(RAMP_S * rate)
    t = np.arange(n) / rate
    envelope = np.ones(n)
    envelope[:ramp] = np.linspace(0, 1, ramp)
    envelope[-ramp:] = np.linspace(1, 0, ramp)
    return np.concatenate([LEVEL * envelope * np.sin(2 * np.pi * FREQS[s] * t) for s in symbols(number)])


def _tones(pcm: np.ndarray, rate: int) -> np.ndarray:
    """For each hop, the symbol whose tone holds DOMINANT of the 600-2200 Hz band's power over the
    SYMBOL_S from there, else -1."""
    n, hop = round(SYMBOL_S * rate), max(1, round(HOP_S * rate))
    starts = np.arange(0, max(0, len(pcm) - n + 1), hop)
    if not len(starts):
        return np.zeros(0, int)
    frames = np.lib.stride_tricks.sliding_window_view(pcm, n)[starts] * np.hanning(n)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    freqs = np.fft.rfftfreq(n, 1 / rate)
    band = power[:, (freqs >= 600) & (freqs <= 2200)].sum(axis=1)
    # a tone's power in its bin and the two beside it (the Hann window's main lobe)
    bins = [int(round(f * n / rate)) for f in FREQS]
    per = np.stack([power[:, b - 1:b + 2].sum(axis=1) for b in bins], axis=1)
    best = per.argmax(axis=1)
    strong = per[np.arange(len(best)), best] >= DOMINANT * np.maximum(band, 1e-12)
    return np.where(strong, best, -1)


def find(pcm: np.ndarray, rate: int) -> list[tuple[float, int]]:
    """The markers in a recording: (their onset in s from its start, number), in order. Each onset is
    refined to the sample by the marker's own waveform."""
    pcm = np.asarray(pcm, dtype=np.float64)
    tones = _tones(pcm, rate)
    step = round(SYMBOL_S / HOP_S)
    found: list[tuple[float, int]] = []
    i = 0
    while i + 2 * step < len(tones):
        a, b, c = tones[i], tones[i + step], tones[i + 2 * step]
        number = int(8 * a + b)
        if a >= 0 and b >= 0 and c == check(number):
            found.append((_onset(pcm, rate, number, i * HOP_S), number))
            i += 3 * step   # past this marker
        else:
            i += 1
    return found


def _onset(pcm: np.ndarray, rate: int, number: int, coarse: float) -> float:
    """The sample, within a symbol of `coarse` (s), where marker `number` matches best."""
    ref = marker(number, rate)
    lo = max(0, round((coarse - SYMBOL_S) * rate))
    hi = min(len(pcm), round((coarse + SYMBOL_S) * rate) + len(ref))
    seg = pcm[lo:hi]
    if len(seg) < len(ref):
        return coarse
    score = np.correlate(seg, ref, mode="valid")
    return (lo + int(np.argmax(score))) / rate


def place(speech: list[np.ndarray], rate: int, length: int, pause_s: float = 0.15) -> tuple[np.ndarray, list[int]]:
    """A loop of `length` samples: each sentence of `speech` (over again as needed), then a pause, a
    marker (numbered in order) and a pause, as many as fit; what is left is filled with the next
    sentence's beginning, faded out, so that the loop holds speech throughout. Returns the loop and
    each marker's onset (samples)."""
    mark, pause, fade = round(MARK_S * rate), round(pause_s * rate), round(pause_s * rate)
    out, onsets, used = [], [], 0
    for k in range(NUMBERS):
        s = speech[k % len(speech)]
        if used + len(s) + mark + 2 * pause > length:
            break
        onsets.append(used + len(s) + pause)
        out += [s, np.zeros(pause), marker(k, rate), np.zeros(pause)]
        used += len(s) + mark + 2 * pause
    if not onsets:
        raise ValueError(f"no sentence and its marker fit in {length / rate:.2f} s")
    rest = speech[len(onsets) % len(speech)][:max(0, length - used - pause)].copy()
    ramp = min(fade, len(rest))
    if ramp:
        rest[-ramp:] *= np.linspace(1, 0, ramp)
    out += [rest, np.zeros(length - used - len(rest))]
    return np.concatenate(out), onsets
