"""The engine's side of the page contract (docs/contracts.md): what participant pages post becomes run
records on the bus, and commands wait for each page's next health record, whose answer carries them.

Pages talk to the engine directly, over HTTP on their own origin (sfubench/pages.py routes the
requests here), not through WebDriver round trips: a measurement is one command to every page, to
start at one instant, and each page posts its samples as it takes them, so a window lasts what the
settings say however many browsers there are, and a slow browser shows up as late samples, not as a
longer run.

Frame times. The sampler (web/sampler.js), a worker that does nothing else, stamps each frame with
the epoch time it got it: a camera frame the moment it is captured, a received frame the moment it is
decoded and handed on for display. Every page of a machine reads the one system clock, so
glass-to-glass delay is the receiver's time for a code minus the sender's time for the same code:
one clock locally, NTP-synchronised clocks across machines. (A frame's own timestamp will not do: for
a received frame Chromium derives it from the sender's RTP timestamps and the RTCP sender reports,
which each SFU rewrites its own way, so it strays from the real time by whatever the SFU reports.)

Everything here runs on the page server's threads as well as the runner's: one lock guards it.
"""
from __future__ import annotations

import io
import math
import re
import threading
import time
import wave
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import numpy as np
from PIL import Image

from quality import check, delay, framecode

from .events import Bus

RETAIN_S = 30.0    # recent frames kept per video, for checks and for delays of captured frames


def _number(v) -> float | None:
    return float(v) if type(v) in (int, float) and math.isfinite(v) else None

def _quantile_ms(counts: Counter, q: float) -> float | None:
    """The q-quantile of a histogram of µs, in ms."""
    total = sum(counts.values())
    if not total:
        return None
    seen = 0
    for us in sorted(counts):
        seen += counts[us]
        if seen >= q * total:
            return round(us / 1000, 2)
    return None


# A captured frame's name is made of its query's values, and its pixels are decoded: both bounded
# before anything is kept (frames are at most the source's size, 1920x1080 in the largest profile).
FRAME_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
AUDIO_RATES = (16_000, 24_000, 32_000, 44_100, 48_000)
MAX_AUDIO_S = 60          # the most seconds a recording may hold (--audio-seconds' bound)
MAX_FRAME_PIXELS = 4096 * 4096
LOOKBACK_S = 5.0   # a window's delays match captures up to this long before it opened


@dataclass(eq=False)
class Page:
    user: str
    room: int
    browser: int | None
    kind: str = "browser"              # or "synthetic": a participant of sfubench-synth
    state: str = "joining"
    reason: str | None = None
    seen: float | None = None          # monotonic time of the page's last message
    joined: float = field(default_factory=time.monotonic)   # this session of the participant began
    left: bool = False                 # it left: neither its samples nor its peers' of it count
    commands: list[dict] = field(default_factory=list)   # for the page's next health record
    frames: dict[str, deque] = field(default_factory=dict)  # video user -> (epoch s, code, points)


@dataclass(eq=False)
class Window:
    phase: str
    id: int
    n: int
    interval: float                     # s between samples
    participants: int
    opened: float                       # epoch s: the first samples are due
    expected: frozenset[str]
    closed: float | None = None
    last_sample: float | None = None    # epoch s the last expected sample arrived
    got: Counter = field(default_factory=Counter)
    took: list[float] = field(default_factory=list)
    lag_max: dict[str, float] = field(default_factory=dict)
    lag_mean: list[float] = field(default_factory=list)
    pacing: Counter = field(default_factory=Counter)   # synthetic generators' lateness: µs -> count
    frames: dict[tuple[str, str], list] = field(default_factory=dict)   # (user, video) -> page frames

    @property
    def complete(self) -> bool:
        return all(self.got[u] >= self.n for u in self.expected)

    @property
    def end(self) -> float:
        """When its last samples are due (epoch s): playback is counted up to here, so every page's
        frames up to it have arrived when the window closes (pages post them twice a second)."""
        return self.opened + (self.n - 1) * self.interval


class Collector:
    def __init__(self, bus: Bus, media, frames_dir: Path):
        self.bus = bus
        self.media = media
        self.layout = media.layout
        self.frames_dir = frames_dir
        self.pages: dict[str, Page] = {}
        self.windows: dict[int, Window] = {}
        self.captured = Counter()       # window -> PNGs received
        # received stream -> monotonic time of its first sample: a wall clock stepped back must not
        # make a new stream older than its sender's session
        self.first_seen: dict[tuple, float] = {}
        self.lock = threading.RLock()

    # -- participants -----------------------------------------------------------------------
    def add_page(self, user: str, room: int, browser: int | None, kind: str = "browser") -> Page:
        with self.lock:
            page = self.pages[user] = Page(user, room, browser, kind)
            return page

    def leave(self, user: str) -> None:
        """The participant left (it may join again later, as a new page)."""
        with self.lock:
            self.pages[user].left = True

    def send(self, cmd: dict, users=None) -> None:
        with self.lock:
            for page in (self.pages.values() if users is None else (self.pages[u] for u in users)):
                page.commands.append(cmd)

    # -- what pages post --------------------------------------------------------------------
    def collect(self, msg: dict) -> list[dict] | dict[str, list[dict]]:
        """Takes one record a page posted; returns the commands waiting for it. Whatever a page
        posts, anything malformed is dropped, never raised: a broken page is its own result.
        A synthetic generator posts a `batch` of its participants' records at once, and gets the
        commands waiting for each of them as {user: [command, ...]}; its own `generator` records
        carry its pacing error."""
        kind = msg.get("type")
        if kind == "batch":
            records = msg.get("records")
            out = {}
            for r in records if isinstance(records, list) else []:
                if isinstance(r, dict) and r.get("type") != "batch":
                    commands = self.collect(r)
                    if commands:
                        out[r["user"]] = commands
            return out
        if kind == "generator":
            self._generator(msg)
            return []
        with self.lock:
            page = self.pages.get(msg.get("user")) if isinstance(msg.get("user"), str) else None
            if page is None:
                return []
            page.seen = time.monotonic()
            kind = msg.get("type")
            if kind == "state":
                self._state(page, msg)
            elif kind == "samples":
                self._samples(page, msg)
            elif kind == "frames" and isinstance(msg.get("series"), dict):
                self._frames(page, msg["series"])
            elif kind == "ice_restart":
                self.bus.event("ice_restart", self._participants(), room=page.room, user=page.user)
            elif kind == "health":
                self._health(page, msg)
                commands, page.commands = page.commands, []
                return commands
            return []

    def _state(self, page: Page, msg: dict) -> None:
        state, reason = msg.get("state"), msg.get("reason")
        reason = None if reason is None else str(reason)
        if page.state == "failed" or state == page.state or state not in ("joining", "joined", "failed"):
            return
        page.state, page.reason = state, reason
        if state == "joined":
            self.bus.event("participant_joined", self._participants(), room=page.room, user=page.user)
        elif state == "failed":
            self.bus.event("participant_failed", self._participants(), room=page.room, user=page.user,
                           reason=reason or "unknown")
            self.bus.say(f"{page.user} failed: {reason}")

    def _participants(self) -> int:
        return len(self.pages)

    def _samples(self, page: Page, msg: dict) -> None:
        window = msg.get("window")
        w = self.windows.get(window) if isinstance(window, int) else None
        if w is None or w.closed is not None:
            return   # a window already closed: counted as missing there
        took = _number(msg.get("took_ms"))
        if took is not None:
            w.took.append(took)
        w.got[page.user] += 1
        samples = msg.get("samples")
        for s in samples if isinstance(samples, list) else []:
            if isinstance(s, dict) and not page.left and not self._stale(page, s):
                s.update(phase=w.phase, window=w.id, participants=w.participants, room=page.room,
                         user=page.user, client=page.kind)
                self.bus.emit("samples", s)
        if w.complete and w.last_sample is None:
            w.last_sample = time.time()

    def _stale(self, page: Page, s: dict) -> bool:
        """Whether `s` is of a stream received from a participant that has left, or from its session
        before it joined again: a receiver (a synthetic one whose SFU never says the track ended,
        a page not yet renegotiated) may report such a stream for as long as it runs, carrying
        nothing, and counted it would read as a stream the SFU failed to deliver."""
        if s.get("direction") != "recv" or not isinstance(s.get("peer"), str):
            return False
        sender = self.pages.get(s["peer"])
        if sender is None:
            return False
        key = (page.user, s["peer"], s.get("kind"), s.get("ssrc"))
        first = self.first_seen.setdefault(key, time.monotonic())
        return sender.left or first < sender.joined

    def _health(self, page: Page, msg: dict) -> None:
        lag_max, lag_mean = _number(msg.get("lag_max_ms")), _number(msg.get("lag_mean_ms"))
        if lag_max is None:
            return
        for w in self.windows.values():
            if w.closed is None:
                w.lag_max[page.user] = max(w.lag_max.get(page.user, 0.0), lag_max)
                if lag_mean is not None:
                    w.lag_mean.append(lag_mean)

    def _generator(self, msg: dict) -> None:
        pacing = msg.get("pacing_us")
        counts = Counter()
        for entry in pacing if isinstance(pacing, list) else []:
            if (isinstance(entry, list) and len(entry) == 2 and all(type(v) is int and v >= 0 for v in entry)):
                counts[entry[0]] += entry[1]
        with self.lock:
            for w in self.windows.values():
                if w.closed is None:
                    w.pacing.update(counts)

    def _frames(self, page: Page, series: dict) -> None:
        own = page.user
        # a window measures those it expected: not who joined after it opened (a storm's)
        open_windows = [w for w in self.windows.values()
                        if w.closed is None and w.phase != "background" and page.user in w.expected]
        for video, samples in series.items():
            if not isinstance(samples, list):
                continue
            recent = page.frames.setdefault(video, deque())
            for sample in samples:
                try:
                    read, cells, points, *known = sample
                    t = float(read) / 1000.0
                except (TypeError, ValueError):
                    continue
                if not math.isfinite(t):
                    continue
                code = None
                if known and type(known[0]) is int and 0 <= known[0] < self.media.frames:
                    code = known[0]   # a synthetic participant knows the codes it sends and recognises
                elif isinstance(cells, list) and all(_number(c) is not None for c in cells):
                    try:
                        code = framecode.decode_levels(cells, self.layout)
                    except ValueError:
                        code = None
                if not isinstance(points, list) or not all(_number(p) is not None for p in points):
                    points = None
                entry = (t, code, points)
                recent.append(entry)
                for w in open_windows:
                    # a page's own camera counts from before the window: it was captured earlier than
                    # the window's received frames that show it
                    if t >= w.opened or (video == own and t >= w.opened - LOOKBACK_S):
                        w.frames.setdefault((page.user, video), []).append(entry)
            while recent and recent[0][0] < recent[-1][0] - RETAIN_S:
                recent.popleft()

    # -- checks -----------------------------------------------------------------------------
    def first_frames(self, videos, after: float) -> dict[tuple[str, str], float | None]:
        """For each (user, video): when the user's page first got a frame of the video after `after`
        (epoch s; among the frames kept, so while followed), or None."""
        with self.lock:
            out = {}
            for user, video in videos:
                page = self.pages.get(user)
                frames = page.frames.get(video, ()) if page else ()
                out[(user, video)] = next((e[0] for e in frames if e[0] > after), None)
            return out

    def verdict(self, user: str, video: str, now: float | None = None) -> str:
        """What `user` sees of `video`'s stream (its own camera when video == user) right now."""
        with self.lock:
            page = self.pages.get(user)
            frames = list(page.frames.get(video, ())) if page else []
        return check.classify(frames, time.time() if now is None else now)

    # -- measurement windows ------------------------------------------------------------------
    def open_window(self, w: Window) -> Window:
        """Takes samples for `w` (its n samples `interval` s apart, the first due at `opened`) from
        the pages it expects."""
        with self.lock:
            self.windows[w.id] = w
            if w.phase != "background":
                # Captures already received that frames to come may show.
                for page in self.pages.values():
                    own = page.frames.get(page.user, ())
                    w.frames[(page.user, page.user)] = [e for e in own if e[0] >= w.opened - LOOKBACK_S]
            return w

    def close_window(self, w: Window, discarded: str | None = None) -> dict:
        """Closes a window: its playback records and its health record (windows.jsonl). A window
        `discarded` (why) keeps its health record, marked, and gives no playback: the reports leave
        out whatever it measured."""
        with self.lock:
            w.closed = time.time()
            if w.phase != "background" and not discarded:
                self._playback(w)
            took = sorted(w.took)
            missing = sum(max(0, w.n - w.got[u]) for u in w.expected)
            record = {
                "phase": w.phase, "window": w.id, "participants": w.participants,
                "opened": round(w.opened * 1000), "closed": round(w.closed * 1000),
                "samples": w.n, "expected": len(w.expected),
                "missing_samples": missing,
                "duration_s": round((w.last_sample or w.closed) - w.opened, 3),
                "stats_ms_p50": round(median(took), 1) if took else None,
                "stats_ms_max": round(took[-1], 1) if took else None,
                "lag_ms_max": round(max(w.lag_max.values()), 1) if w.lag_max else None,
                "lag_ms_mean": round(sum(w.lag_mean) / len(w.lag_mean), 1) if w.lag_mean else None,
                "pacing_ms_p95": _quantile_ms(w.pacing, 0.95),
                "pacing_ms_p99": _quantile_ms(w.pacing, 0.99),
                "pacing_ms_max": round(max(w.pacing) / 1000, 2) if w.pacing else None,
                **({"discarded": discarded} if discarded else {}),
            }
            self.windows.pop(w.id, None)
            self.bus.emit("windows", record)
            return record

    def _playback(self, w: Window) -> None:
        loop, fps = self.media.frames, self.media.fps
        for (user, video), frames in sorted(w.frames.items()):
            if user == video:
                continue
            viewer, sender = self.pages[user], self.pages.get(video)
            if viewer.kind == "synthetic" and (sender is None or sender.kind != "synthetic"):
                continue   # it recognises only the clip's frames as sent: a browser's carry no code it can read
            codes = [(t, c) for t, c, _ in frames if w.opened <= t <= w.end]
            pb = delay.playback(codes, loop, span=w.end - w.opened)
            sent = w.frames.get((video, video), [])
            delays = sorted(delay.delays_ms(codes, [(t, c) for t, c, _ in sent], loop, fps))
            self.bus.emit("playback", {
                "phase": w.phase, "window": w.id, "participants": w.participants,
                "room": viewer.room, "user": user, "client": viewer.kind,
                "peer": video, "peer_client": sender.kind if sender else None, "frames": len(codes),
                "decoded": sum(c is not None for _, c in codes),
                "duration": round(pb.duration, 3), "shown": pb.shown,
                "effective_fps": round(pb.effective_fps, 2), "skipped": pb.skipped,
                "backwards": pb.backwards, "freezes": pb.freezes, "freeze_s": round(pb.freeze_s, 3),
                "longest_freeze_s": round(pb.longest_freeze_s, 3),
                "delay_ms": round(median(delays), 1) if delays else None,
                "delay_ms_p90": round(float(np.percentile(delays, 90)), 1) if delays else None,
                "delays": len(delays)})

    def _heard_from(self, query: dict) -> Page | None:
        """The page a /frame or /audio post names (its last message now), or None; under the lock."""
        page = self.pages.get(query.get("user", ""))
        if page is not None:
            page.seen = time.monotonic()
        return page

    # -- captured frames (after the window, for the after-run scores) -------------------------
    def frame(self, query: dict, png: bytes) -> None:
        """A received frame as PNG: saved in frames/ and listed in frames/index.jsonl. The image is
        decoded outside the lock (one page's large frame holds up no other page's /collect), and a
        frame whose names or size are out of bounds is dropped."""
        peer, window, i = query.get("peer", ""), query.get("window", ""), query.get("i", "0")
        if not (FRAME_NAME.fullmatch(peer) and window.isdigit() and i.isdigit() and len(window + i) <= 12):
            return
        try:
            image = Image.open(io.BytesIO(png))
            if image.width * image.height > MAX_FRAME_PIXELS:
                return
            rgb = np.asarray(image.convert("RGB"))
            t = float(query.get("read", "nan")) / 1000.0
        except (OSError, ValueError, Image.DecompressionBombError):
            return
        with self.lock:
            page = self._heard_from(query)
            if page is None:
                return
            name = f"w{window}-{page.user}-{peer}-{i}.png"
            w = int(window)
            self.captured[w] += 1
        self.frames_dir.mkdir(parents=True, exist_ok=True)
        (self.frames_dir / name).write_bytes(png)
        self.bus.emit("frames", {
            "t": round(t * 1000), "phase": query.get("phase"), "window": w,
            "participants": int(query["participants"]) if query.get("participants", "").isdigit() else None,
            "room": page.room, "user": page.user, "peer": peer,
            "code": framecode.decode(rgb, self.layout),
            "frozen": self.verdict(page.user, peer) == "frozen", "frame": name})

    # -- recorded audio (after the run, for the speech scores and the mouth-to-ear delay) ------
    def audio(self, query: dict, pcm: bytes) -> None:
        """A recording a page posted (16-bit mono PCM): of what it heard from `peer`, or (peer being
        the page's own user) of its microphone. Saved as a WAV in audio/ and listed in
        audio/index.jsonl with the epoch time of its first sample; one whose names, rate, time or
        length are out of bounds is dropped."""
        peer, window = query.get("peer", ""), query.get("window", "")
        try:
            rate, t0 = int(query.get("rate", "0")), float(query.get("t0", "nan"))
        except ValueError:
            return
        if not (FRAME_NAME.fullmatch(peer) and window.isdigit() and len(window) <= 9 and rate in AUDIO_RATES
                and math.isfinite(t0) and 0 < len(pcm) <= 2 * rate * MAX_AUDIO_S and len(pcm) % 2 == 0):
            return
        with self.lock:
            page = self._heard_from(query)
        if page is None:
            return
        name = f"w{window}-{page.user}-{peer}.wav"
        folder = self.frames_dir.parent / "audio"
        folder.mkdir(parents=True, exist_ok=True)
        with wave.open(str(folder / name), "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(rate)
            f.writeframes(pcm)
        self.bus.emit("audio", {
            "t": round(t0, 3), "phase": query.get("phase"), "window": int(window),
            "participants": int(query["participants"]) if query.get("participants", "").isdigit() else None,
            "room": page.room, "user": page.user, "peer": peer, "rate": rate, "samples": len(pcm) // 2,
            "file": name})
