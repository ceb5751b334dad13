"""What the analysis takes from samples.jsonl, folded in one pass that can go on where it stopped.

A run's samples are most of its folder (150 MB for 24 rooms of 7). The engine asks for the knee after
every step; read from the start each time, the ramp's last steps spent seconds on it, and the run as a
whole time that grew with the square of its steps. A SampleFold kept across those asks parses each
line once: read() takes only the whole lines appended since the last, and a measured window, once
windows.jsonl says it closed (the collector takes no sample for a closed window), becomes its
observations and lets its samples go. A window the runner discarded (its wall clock stepped in it)
gives nothing: its samples are dropped, and a background stream's next rate is not taken across it."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from .cost import Spans
from .runfiles import AUDIO_MARKS, BACKGROUND_MARKS, parse_line
from .windows import MEASURED, StreamFold, Totals


class SampleFold:
    def __init__(self, path: Path, discarded: Iterable = ()):
        self.path = Path(path)
        self.discarded = set(discarded)   # window ids whose samples count for nothing
        self.offset = 0          # bytes of the file folded in
        self.damaged = 0         # unreadable lines (background audio ones aside, which no figure reads)
        self.streams = StreamFold()
        self.audio = StreamFold(("audio",))    # measured windows' audio: what participants heard
        self.audio_closed: list[dict] = []
        self.spans = Spans()     # for the SFU's cost
        self.closed: list[dict] = []                              # observations of closed measured windows
        self.totals: dict[tuple, Totals] = defaultdict(Totals)    # (phase, window) -> its video figures

    def read(self, windows: Iterable[dict] = (), final: bool = True, discarded: Iterable = ()) -> "SampleFold":
        """Folds in what the file gained, then closes the measured windows of `windows` (windows.jsonl's
        records, read before the samples) and drops those `discarded` (window ids). While the run
        goes on (`final` False) a line still being written waits for the next read; at the end the
        last line counts, whole or damaged. (Background rates folded before a discard is known may
        span the step: only a fold that knows it from the start, as a report's, leaves them out.)"""
        for window in set(discarded) - self.discarded:
            self.discarded.add(window)
            self.streams.drop(window)
            self.audio.drop(window)
            self.spans.drop(window)
            for key in [k for k in self.totals if k[1] == window]:
                del self.totals[key]
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return self
        with f:
            f.seek(self.offset)
            for line in f:
                if not final and not line.endswith(b"\n"):
                    break
                self.offset += len(line)
                self._fold(line)
        for w in windows:
            if w.get("phase") in MEASURED:
                for o in self.streams.close(w["phase"], w.get("window")):
                    self.totals[(o["phase"], o["window"])].add(o)
                    self.closed.append(o)
                self.audio_closed += self.audio.close(w["phase"], w.get("window"))
        return self

    def _fold(self, line: bytes) -> None:
        # Background audio lines, the most numerous, serve no figure: they are left unparsed. (The
        # marks are tested one by one, not in a generator: this runs for every line of the run.)
        audio = AUDIO_MARKS[0] in line or AUDIO_MARKS[1] in line
        background = BACKGROUND_MARKS[0] in line or BACKGROUND_MARKS[1] in line
        if (audio and background) or not line.strip():
            return
        s = parse_line(line)
        if s is None:
            self.damaged += 1
            return
        if s.get("window") in self.discarded:
            self.streams.forget_previous()   # the step lies between the stream's last sample and its next
            return
        if audio:
            self.audio.add(s)
        elif (o := self.streams.add(s)) is not None:
            self.totals[(o["phase"], o["window"])].add(o)
        if not background:
            self.spans.add(s)

    def observations(self) -> tuple[list[dict], dict[tuple, Totals]]:
        """The measured windows' observations (a new list) and every window's totals, the windows not
        closed yet taken from their samples so far (and not kept: more may come)."""
        obs, totals, fresh = list(self.closed), dict(self.totals), {}
        for o in self.streams.pending():
            key = (o["phase"], o["window"])
            if key not in fresh:
                fresh[key] = totals[key] = Totals().merge(self.totals[key]) if key in self.totals else Totals()
            fresh[key].add(o)
            obs.append(o)
        return obs, totals

    def audio_observations(self) -> list[dict]:
        """The measured windows' audio observations (a new list), those not closed yet from their
        samples so far."""
        return [*self.audio_closed, *self.audio.pending()]
