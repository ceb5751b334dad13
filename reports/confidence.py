"""Figures over repeated runs, and whether two of them differ by more than the runs' own noise.

A figure an SFU was measured at over its runs is a Span. Two spans differ when the 95 % bootstrap
interval of the difference of their medians (each SFU's runs resampled with replacement, apart)
leaves out zero; with a single run on either side nothing measures the noise, and they are level at
this resolution. A span open above (a run with no knee: the knee is past what it reached) cannot be
resampled: it is ahead of another only where its lowest value is above the other's highest, and
nothing is ahead of it. `study` and `compare` word their verdicts from here."""
from __future__ import annotations

import random
from dataclasses import dataclass
from statistics import median

LEVEL = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Span:
    """A figure over an SFU's runs: its values; `open_above` when a run only bounds it from below."""
    values: tuple[float, ...]
    open_above: bool = False

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return float("inf") if self.open_above else max(self.values)

    @property
    def middle(self) -> float:
        return median(self.values)

    def text(self, digits: int = 0) -> str:
        if self.open_above:
            return f"> {number(self.low, digits)}"
        if number(self.low, digits) == number(self.high, digits):
            return number(self.middle, digits)
        return f"{number(self.middle, digits)} ({number(self.low, digits)}–{number(self.high, digits)})"


def number(v: float, digits: int = 0) -> str:
    if digits:
        return f"{v:.{digits}f}"
    return f"{v:g}" if v == int(v) else f"{v:.1f}"   # a median of two counts falls between them


def interval(a: Span, b: Span, level: float = LEVEL, resamples: int = RESAMPLES) -> tuple[float, float] | None:
    """The bootstrap percentile interval of median(a) - median(b); None with one run on either side
    or an open span. Seeded by the values, so a report says the same each time it is built."""
    if len(a.values) < 2 or len(b.values) < 2 or a.open_above or b.open_above:
        return None
    rng = random.Random(repr((a.values, b.values)))
    diffs = sorted(median(rng.choices(a.values, k=len(a.values))) - median(rng.choices(b.values, k=len(b.values)))
                   for _ in range(resamples))
    tail = round((1 - level) / 2 * resamples)
    return diffs[tail], diffs[resamples - 1 - tail]


def ahead(x: Span, y: Span, higher_is_better: bool = True) -> bool:
    """Whether x is better than y beyond the noise."""
    if x.open_above or y.open_above:
        return x.low > y.high if higher_is_better else x.high < y.low
    iv = interval(x, y)
    return iv is not None and (iv[0] > 0 if higher_is_better else iv[1] < 0)


def ranks(spans: dict[str, Span | None], higher_is_better: bool = True) -> dict[str, int]:
    """1 + how many are better beyond the noise; level ones share a rank."""
    known = {k: s for k, s in spans.items() if s is not None}
    return {k: 1 + sum(1 for j, t in known.items() if j != k and ahead(t, s, higher_is_better))
            for k, s in known.items()}


def verdicts(spans: dict[str, Span | None], what: str, better: str, higher_is_better: bool = True,
             digits: int = 0) -> list[str]:
    """One sentence per neighbouring pair, best first: which is ahead beyond the noise, with the
    interval that says so, or that they are level and why."""
    sign = -1 if higher_is_better else 1
    known = sorted(((k, s) for k, s in spans.items() if s is not None), key=lambda ks: sign * ks[1].middle)
    out = []
    for (a, sa), (b, sb) in zip(known, known[1:]):
        values = f"{sa.text(digits)} vs {sb.text(digits)}"
        iv = interval(sa, sb)
        shown = iv and f"{number(iv[0], digits or 1)} to {number(iv[1], digits or 1)}"
        if ahead(sa, sb, higher_is_better):
            why = (f"{LEVEL:.0%} interval of the difference {shown}" if iv
                   else "their ranges part, one bounded only from below")
            out.append(f"{a}'s {what} is {better} than {b}'s: {values}; {why}.")
        else:
            why = (f"the {LEVEL:.0%} interval of the difference, {shown}, holds 0" if iv
                   else "their ranges overlap" if sa.open_above or sb.open_above
                   else "one run of either: nothing measures the noise")
            out.append(f"{a} and {b} are level at this resolution ({what} {values}: {why}).")
    return out
