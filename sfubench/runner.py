"""The scenario: the study's room-by-room ramp, on browsers opened through a Selenium Grid.

For each step of the load shape: start a room's participants, verify every video of the room is
playing (or let its check time out), take a ramp-up measurement, go on. At target load take the
target measurement. Background samples run through everything else.

WebDriver only opens browsers, adds participants to them and keeps their sessions alive
(sfubench/browsers.py); everything the pages measure reaches
the engine through the collector, and every command (measure, capture) goes to the pages through it.
A measurement is scheduled a moment ahead, so that every page has picked the command up and all
start at the same instant: the window lasts what the settings say however many browsers there are.

(Still over 400 lines: the Runner's steps share the live participants and the windows' schedule;
split further, that state would be passed between them at every step.)
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .browsers import Browser, Browsers
from .clock import OFFSET_TOLERANCE_MS, ClockStepped
from .collector import Collector, Window
from .grid import GridLost
from .events import Bus
from .memory import give_back
from .phases import PHASES
from .sfuserver import SfuFailed
from .shapes import LoadShape, Status, Step

SILENT_S = 15.0       # a page that posted nothing (not even its 1-s health record) for this long is lost
LOAD_S = 60.0         # a page that never reported this long after being added did not load
SAMPLE_GRACE_S = 3.0  # how long after a window's last sample is due its samples may still arrive
LEAD_S = 1.0          # how far ahead a window starts: pages look for commands twice a second
FRAME_FLUSH_S = 0.6   # pages post frame codes every 0.5 s: wait this long for a window's last ones
CAPTURE_GAP_S = 0.5   # between two captured frames of one video
POLL_S = 0.25
WATCH_S = 1.0         # how often the SFU and the run folder are checked
NETWORK_SETTLE_S = 5.0  # after the network changes: congestion control and jitter buffers adapt
RECOVERY_MAX_S = 30.0   # after a profile is lifted, how long videos have to play again
MEASURE_TRIES = 3       # a window the wall clock stepped in is measured again, up to this many times


class ClientFailure(RuntimeError):
    """The clients failed so that the run cannot go on: a participant, under --on-client-failure
    abort, or the synthetic participants' generator, whose every later participant would fail too."""


@dataclass(eq=False)
class Participant:
    id: str
    room: int
    browser: "Browser | None"    # None for a synthetic participant
    added: float                 # monotonic
    failed: str | None = None
    joined: float = 0.0          # epoch s: its (latest) join began

    @property
    def kind(self) -> str:
        return "synthetic" if self.browser is None else "browser"


@dataclass(frozen=True)
class Clients:
    """How the runner reaches its participants: `open_browser()` returns a WebDriver already showing
    the host page, `client_url(room, user)` gives a participant's page; `generator`
    (sfubench.synthetic.Generator) carries the participants the settings make synthetic, which join
    with `client_params(room, user)`; `reconnect_s`, the delays before each rejoin of a participant
    whose session ended after a planned restart, as its SFU's official client retries."""
    open_browser: Callable
    client_url: Callable
    generator: object = None
    client_params: Callable | None = None
    reconnect_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class Watches:
    """What the runner reads and keeps an eye on: `probes`, read at both edges of every measurement
    and at every background tick; `checks` (the SFU's health, the run folder's, the clock), called
    about once a second, which raise when the run cannot go on; `set_network(profile or None)`, which
    puts the lab's link under a profile (None: the run's own; no emulator: None); `restart()`, which
    stops the SFU and starts it again (None: the site cannot)."""
    probes: tuple = ()
    checks: tuple = ()
    set_network: Callable | None = None
    restart: Callable[[], None] | None = None


class Runner:
    """Runs one scenario over the participants `clients` reach, measuring with `watches`."""

    def __init__(self, cfg, shape: LoadShape, bus: Bus, collector: Collector, clients: Clients,
                 watches: Watches = Watches()):
        self.cfg = cfg
        self.shape = shape
        self.bus = bus
        self.collector = collector
        self.client_url = clients.client_url
        self.synthetic = clients.generator
        self.client_params = clients.client_params
        self.set_network = watches.set_network
        self.restart_sfu = watches.restart
        self.reconnect_s = clients.reconnect_s
        self.network = None
        self.probes = list(watches.probes)
        self.watches = list(watches.checks)
        self.next_watch = 0.0
        self.clocks_flagged: set[str] = set()   # roles whose hosts' clocks were found astray
        self.steps: list[ClockStepped] = []     # the wall clock's steps so far: each costs its window
        self.browsers = Browsers(clients.open_browser, self.event, self.say, self.fail)
        self.participants: list[Participant] = []
        self.status = Status()
        self.window = 0
        self.background: Window | None = None
        self.background_steps = 0
        self.next_background = None
        self.sfu_used: dict[int, float] = {}   # count -> share of its budget the SFU used in its first ramp window
        self.sfu_opened: tuple[int, float] | None = None   # (t, cpu_s) of the SFU at the open ramp window's start

    # -- the scenario ----------------------------------------------------------------------------
    def run_scenario(self) -> None:
        if self.cfg.background_interval > 0:
            self.next_background = time.monotonic() + self.cfg.background_interval
        while (step := self.shape.tick(self.status)) is not None:
            if step.reason:
                self.say(step.reason)
            if step.phase in PHASES:   # each minds its step's network itself
                PHASES[step.phase](self, step)
                continue
            if step.network != self.network:
                self.change_network(step.network)
            changed = self.status.participants != step.participants
            joined = self.resize(step.participants)
            for room in joined:
                self.validate(room)
            if changed and self.cfg.settle:
                self.say(f"settling {self.cfg.settle:g} s before measuring", transient=True)
                # the window's lead is part of it: its first sample comes `settle` s after the validation
                self.wait(max(0.0, self.cfg.settle - LEAD_S))
            if step.phase == "network":
                self.measure("network", self.cfg.network_samples)
            else:
                self.measure("ramp", self.cfg.ramp_samples)
        if self.network is not None:
            self.change_network(None)
        if self.shape.done:
            self.say(f"load: {self.shape.done}")
        self.event("target_reached", reason=self.shape.done)
        self.measure("target", self.cfg.target_samples)
        self.end_background()

    def resize(self, participants: int) -> list[int]:
        """Brings the run to `participants`: the newest leave, or those who left join again (the
        first to have joined first), then new ones join, room by room. So the first n started are
        always the n taking part. Returns the rooms that gained participants, to validate."""
        joined: list[int] = []
        leaving = self.status.participants - participants
        while self.status.participants > participants:
            newest = next(p for p in reversed(self.participants) if p.failed != "left")
            self.leave(newest.id, say=False)
            self.status.participants -= 1
        if leaving > 0:
            self.say(f"{leaving} participant{'s' if leaving > 1 else ''} left ({participants} participants)")
        while self.status.participants < participants:
            back = next((p for p in self.participants if p.failed == "left"), None)
            if back is not None:
                if self.cfg.join_interval and self.status.participants % self.cfg.users_per_room:
                    self.wait(self.cfg.join_interval)   # paced as the room's first joins were
                self.rejoin(back.id)
                self.status.participants += 1
                room = back.room
            else:
                room = self.status.participants // self.cfg.users_per_room + 1
                if room > self.status.rooms:
                    self.status.rooms = room
                    self.event("room_started", room=room)
                self.start_participant(room)
            if room not in joined:
                joined.append(room)
        self.status.rooms = max((p.room for p in self.participants if p.failed != "left"), default=0)
        return joined

    def change_network(self, name: str | None) -> None:
        """Puts the link under profile `name` (None: the run's own), then lets the clients' congestion
        control and jitter buffers settle before anything is measured."""
        if self.set_network is None:
            raise RuntimeError("this run's link cannot change its network (no emulator)")
        left = self.network
        shown = self.set_network(name)
        changed = time.time()
        self.network = name
        self.event("network_changed", network=shown)
        self.say(f"network: now {shown}")
        if left is None:
            self.wait(NETWORK_SETTLE_S)
        else:
            self.recover(left, changed)

    def recover(self, left: str, changed: float) -> None:
        """After profile `left` is lifted (at `changed`, epoch s): waits until every video the
        browsers show plays again, at least NETWORK_SETTLE_S and at most RECOVERY_MAX_S, and
        records how long the slowest took (a partition is loss, then this time; not a knee)."""
        receivers = [p for p in self.participants if p.browser is not None and not p.failed]
        videos = [(p.id, q.id) for p in receivers for q in self.participants
                  if q.room == p.room and q.id != p.id and not q.failed and self.cfg.publishes(q.id)]
        self.follow(True)
        start = time.monotonic()
        while True:
            first = self.collector.first_frames(videos, changed)
            waited = time.monotonic() - start
            if waited >= RECOVERY_MAX_S or (waited >= NETWORK_SETTLE_S and None not in first.values()):
                break
            self.wait(0.25)
        self.follow(False)
        back = [t - changed for t in first.values() if t is not None]
        seconds = round(max(back), 2) if back and len(back) == len(videos) else None
        self.event("network_recovered", network=left, videos=len(videos), recovered=len(back), seconds=seconds,
                   within=RECOVERY_MAX_S)
        self.say(f"network: {len(back)}/{len(videos)} videos playing again after {left}"
                 + (f", the slowest in {seconds:g} s" if seconds is not None else
                    f"; the rest not within {RECOVERY_MAX_S:g} s"))

    def note_sfu_used(self, row: dict, edge: str) -> None:
        """Keeps what share of its budget the SFU used over the first ramp window at each count."""
        if edge == "start":
            self.sfu_opened = (row["t"], row["cpu_s"])
        elif self.sfu_opened is not None and row["t"] > self.sfu_opened[0]:
            seconds = (row["t"] - self.sfu_opened[0]) / 1000
            share = (row["cpu_s"] - self.sfu_opened[1]) / seconds / row["cores"]
            self.sfu_used.setdefault(row["participants"], share)   # as the ramp first met the count
            self.sfu_opened = None

    def sfu_share(self, seconds: float) -> float | None:
        """The share of its budget the SFU used over the next `seconds`, waited out; None where no
        probe reads its CPU."""
        probe = next((p for p in self.probes if p.role == "sfu"), None)
        start, used = time.monotonic(), None
        try:
            used = probe.read()[0] if probe else None
        except (OSError, ValueError, KeyError):
            pass
        self.wait(seconds)
        if used is None:
            return None
        try:
            return (probe.read()[0] - used) / (time.monotonic() - start) / probe.cores
        except (OSError, ValueError, KeyError):
            return None

    def event(self, name: str, **fields) -> None:
        self.bus.event(name, self.status.participants, **fields)

    def say(self, message: str, transient: bool = False) -> None:
        self.bus.say(message, transient)

    def start_participant(self, room: int) -> None:
        index = self.status.participants % self.cfg.users_per_room + 1
        p_id = f"r{room}u{index}"
        if index > 1 and self.cfg.join_interval:
            self.wait(self.cfg.join_interval)
        if not self.cfg.real(room, index):
            self._start_synthetic(p_id, room)
            return
        browser = self.browsers.with_room(self.cfg.participants_per_browser) or self._open()
        p = Participant(p_id, room, browser, time.monotonic(), joined=time.time())
        browser.participants.append(p)
        self.participants.append(p)
        self.status.participants += 1
        self.collector.add_page(p_id, room, browser.index)
        self.event("participant_started", room=room, user=p_id, browser=browser.index, **self.role(p_id))
        self.say(f"room {room}/{self.cfg.rooms_cap}: {p_id} joining ({self.status.participants} participants)")
        if browser.driver is None:
            self.fail(p, f"browser {browser.index} could not be opened")
            return
        self._load(p)

    def _start_synthetic(self, p_id: str, room: int) -> None:
        p = Participant(p_id, room, None, time.monotonic(), joined=time.time())
        self.participants.append(p)
        self.status.participants += 1
        self.collector.add_page(p_id, room, None, kind="synthetic")
        self.event("participant_started", room=room, user=p_id, client="synthetic", **self.role(p_id))
        self.say(f"room {room}/{self.cfg.rooms_cap}: {p_id} joining, synthetic ({self.status.participants} "
                 "participants)")
        self.join_synthetic(p)

    def role(self, p_id: str) -> dict:
        """What a participant's start says of its role: a viewer's, that it publishes nothing."""
        return {} if self.cfg.publishes(p_id) else {"publishes": False}

    def join_synthetic(self, p: Participant) -> None:
        self.synthetic.join(p.id, p.room, self.client_params(p.room, p.id), self.cfg.receive_layer_of(p.id),
                            publish=self.cfg.publishes(p.id))

    def _load(self, p: Participant) -> None:
        url = self.client_url(p.room, p.id)
        if self.browsers.attempt(p.browser, "add", p.browser.driver.execute_script,
                                 "sfubenchHost.add(arguments[0], arguments[1])", p.id, url) is None:
            self.fail(p, f"browser {p.browser.index} did not take the participant")

    def leave(self, p_id: str, say: bool = True) -> None:
        """The participant leaves: its page is closed, as a person closing the tab would."""
        p = next(p for p in self.participants if p.id == p_id)
        if p.browser is None:
            self.synthetic.leave(p_id)
        else:
            self.browsers.attempt(p.browser, "remove", p.browser.driver.execute_script,
                                  "return sfubenchHost.remove(arguments[0])", p_id)
        p.failed = "left"   # no longer measured or checked
        self.collector.leave(p_id)
        self.event("participant_left", room=p.room, user=p_id)
        if say:
            self.say(f"room {p.room}: {p_id} left")

    def rejoin(self, p_id: str) -> None:
        """A participant that left joins again with the same user id, in a fresh page."""
        p = next(p for p in self.participants if p.id == p_id)
        p.failed, p.added, p.joined = None, time.monotonic(), time.time()
        self.collector.add_page(p_id, p.room, p.browser.index if p.browser else None, kind=p.kind)
        self.event("participant_rejoined", room=p.room, user=p_id)
        self.say(f"room {p.room}: {p_id} joining again")
        if p.browser is None:
            self.join_synthetic(p)
        else:
            self._load(p)

    def _open(self) -> Browser:
        try:
            return self.browsers.open()
        except GridLost as e:   # every browser went with it
            for p in self.participants:
                if p.browser is not None and not p.failed:
                    self.fail(p, str(e))
            raise

    def fail(self, p: Participant, reason: str) -> None:
        if p.failed:
            return
        p.failed = reason
        page = self.collector.pages.get(p.id)
        if page is None or page.state != "failed":   # else the page said so and it is recorded
            self.event("participant_failed", room=p.room, user=p.id, reason=reason)
            self.say(f"{p.id} failed: {reason}")
        if self.cfg.on_client_failure == "abort":
            raise ClientFailure(f"{p.id} failed ({reason}) and --on-client-failure is abort")

    def check(self) -> None:
        """Runs the watches, at most once per WATCH_S: an SFU that died or hung (recorded with its
        exit code and the end of its log), a clock that stepped, a generator that exited (its
        participants failed with why) stop the run."""
        now = time.monotonic()
        if now < self.next_watch:
            return
        self.next_watch = now + WATCH_S
        for watch in self.watches:
            try:
                watch()
            except SfuFailed as e:
                self.event("sfu_exited", code=e.code, reason=str(e), log=e.log)
                raise
            except ClockStepped as e:   # records either side do not compare: the window open is lost
                self.steps.append(e)
                self.event("clock_stepped", seconds=round(e.seconds, 3), reason=str(e))
        gone = self.synthetic.failure() if self.synthetic is not None else None
        if gone:
            for p in self.participants:
                if p.browser is None and not p.failed:
                    self.fail(p, gone)
            raise ClientFailure(gone)

    def note_failures(self) -> None:
        """Marks participants whose page failed, never loaded, or went silent."""
        self.check()
        now = time.monotonic()
        for p in self.participants:
            if p.failed:
                continue
            page = self.collector.pages[p.id]
            if page.state == "failed":
                p.failed = page.reason or "unknown"
            elif page.seen is None and now - p.added > LOAD_S:
                self.fail(p, f"its page did not report within {LOAD_S:.0f} s")
            elif page.seen is not None and now - page.seen > SILENT_S:
                self.fail(p, f"its page stopped reporting for {now - page.seen:.0f} s")

    def live(self) -> list[str]:
        return [p.id for p in self.participants if not p.failed]

    # -- validation ------------------------------------------------------------------------------
    def validate(self, room: int, deadline: float | None = None) -> None:
        """Checks every video of the room (each participant's own camera and every remote) until it
        is verified playing or the per-video timeout passes (or `deadline`, monotonic s)."""
        members = [p for p in self.participants if p.room == room and p.failed != "left"]
        users = [p.id for p in members]
        by_id = {p.id: p for p in members}

        def hopeless(key) -> bool:   # a video its receiver or its sender failed: no wait will play it
            return bool(by_id[key[0]].failed or by_id[key[1]].failed)
        pending = {(p.id, u): "missing" for p in members for u in users if self.cfg.publishes(u)}
        total = len(pending)
        started = time.monotonic()
        deadline = started + self.cfg.video_timeout if deadline is None else deadline
        self.follow(True)
        while pending and time.monotonic() < deadline:
            self.note_failures()
            if all(hopeless(key) for key in pending):
                break
            for key in list(pending):
                verdict = self.collector.verdict(*key)
                pending[key] = verdict
                if verdict == "playing":
                    del pending[key]
                    self.record_check(room, key, True, verdict, time.monotonic() - started,
                                      self.first_frame(by_id[key[0]], by_id[key[1]]))
            self.say(f"room {room}/{self.cfg.rooms_cap}: checks {total - len(pending)}/{total} playing",
                     transient=True)
            if pending:
                self.wait(POLL_S)
        for key, verdict in pending.items():
            self.record_check(room, key, False, verdict, time.monotonic() - started)
        ok = total - len(pending)
        self.event("room_validated" if not pending else "room_timeout", room=room)
        failed = sum(1 for key in pending if hopeless(key))
        why = []
        if failed:
            why.append(f"{failed} not checked: a participant of theirs failed")
        if len(pending) > failed:
            late = [f"{user}'s {'own camera' if peer == user else peer} {verdict}"
                    for (user, peer), verdict in pending.items() if not hopeless((user, peer))]
            why.append(f"{len(late)} timed out after {deadline - started:.0f} s ("
                       + ", ".join(late[:3]) + (", ..." if len(late) > 3 else "") + ")")
        self.say(f"room {room}/{self.cfg.rooms_cap}: {ok}/{total} videos playing" + "".join(f"; {w}" for w in why))

    def record_check(self, room, key, ok, verdict, elapsed, first_frame: float | None = None) -> None:
        p_id, user = key
        self.bus.emit("checks", {"room": room, "user": p_id, "client": self.collector.pages[p_id].kind,
                                 "peer": user, "ok": ok, "verdict": verdict, "elapsed": round(elapsed, 2),
                                 "participants": self.status.participants,
                                 **({} if first_frame is None else {"first_frame_s": first_frame})})

    def first_frame(self, receiver: Participant, sender: Participant) -> float | None:
        """Seconds from the later of their joins until `receiver` got its first frame of `sender`'s
        video; known for a synthetic receiver, which keeps its frames from its join (a page starts
        when the engine first follows)."""
        if receiver.browser is not None or receiver is sender:
            return None
        since = max(receiver.joined, sender.joined)
        first = self.collector.first_frames([(receiver.id, sender.id)], since)[(receiver.id, sender.id)]
        return None if first is None else round(first - since, 3)

    # -- measuring -------------------------------------------------------------------------------
    def measure(self, phase: str, n: int, during: Callable[[], None] | None = None,
                participants: int | None = None) -> dict:
        """A measurement window: every live page takes n samples `sample_interval` apart. The window
        closes when they are all in, or SAMPLE_GRACE_S after the last was due; its health (how long
        it took, samples missing, getStats times, main-thread lag) goes to windows.jsonl. Frames for
        the after-run scores are captured after the window, so encoding them is not measured. A
        window the wall clock stepped in is discarded and measured again (MEASURE_TRIES at most:
        a clock that steps every time stops the run). `during` runs as the window opens (a join
        storm), whose step's count is then `participants`. Returns the health of the window kept."""
        self.end_background()
        give_back()   # what the last window's frames and captures freed: runs go on for hours
        self.browsers.keep()
        self.note_failures()
        for _ in range(MEASURE_TRIES):
            steps = len(self.steps)
            w, health = self._window(phase, n, during, participants)
            during = None   # a storm joins once: a window measured again measures it after its joins
            if len(self.steps) == steps:
                break
            moved = ", then ".join(f"{e.seconds:+.1f} s" for e in self.steps[steps:])
            self.say(f"{phase}: the wall clock stepped {moved} during the window at {self.status.participants} "
                     "participants: it is discarded and measured again")
        else:
            raise self.steps[-1]
        if self.cfg.quality_frames:
            self.capture(phase, w.id)
        self.note_failures()
        return health

    def _window(self, phase: str, n: int, during: Callable[[], None] | None = None,
                participants: int | None = None) -> tuple[Window, dict]:
        """One measurement window, opened, waited for and closed (discarded where the clock stepped)."""
        steps = len(self.steps)
        self.follow(True)   # from now: the window's first frames may show codes captured before it
        w = self.schedule(phase, n, participants)
        # waited for on the monotonic clock: a wall clock stepped back must not hold the run up
        opens = time.monotonic() + (w.opened - time.time())
        while (now := time.monotonic()) < opens:
            self.check()
            time.sleep(max(0.0, min(opens - now, POLL_S)))
        self.read_probes(phase, w.id, "start", w.participants)
        deadline = time.monotonic() + (n - 1) * self.cfg.sample_interval + SAMPLE_GRACE_S
        if during is not None:
            during()
        while not w.complete and time.monotonic() < deadline:
            self.check()
            time.sleep(0.05)
        self.read_probes(phase, w.id, "end", w.participants)
        time.sleep(FRAME_FLUSH_S)
        health = self.collector.close_window(w, self._discarded(steps))
        self.follow(False)
        self.say(f"{phase}: {n} samples at {w.participants} participants in "
                 f"{health['duration_s']:.1f} s" + (f" ({health['missing_samples']} samples missing)"
                                                   if health["missing_samples"] else ""))
        return w, health

    def _discarded(self, steps: int) -> str | None:
        """Why a window opened when `steps` clock steps had been seen is discarded, if it is."""
        return str(self.steps[-1]) if len(self.steps) > steps else None

    def follow(self, on: bool) -> None:
        """Frame codes are read (checks, playback, delay) only while followed: between times the
        browsers spend nothing on it. (A validation goes on following into the window after it, or
        the storm's window it is part of, which stops it.)"""
        self.collector.send({"cmd": "follow", "on": on}, self.live())

    def schedule(self, phase: str, n: int, participants: int | None = None) -> Window:
        """Opens a window that every live page starts sampling at LEAD_S from now, at the step's
        count `participants` (else the count now)."""
        self.window += 1
        users = self.live()
        count = self.status.participants if participants is None else participants
        w = self.collector.open_window(Window(phase, self.window, n, self.cfg.sample_interval,
                                              count, time.time() + LEAD_S, frozenset(users)))
        self.collector.send({"cmd": "measure", "phase": phase, "window": w.id, "n": n,
                             "interval": self.cfg.sample_interval, "at": round(w.opened * 1000),
                             "participants": count,
                             # browsers record what they hear (synthetic participants decode nothing)
                             "record": self.recording(phase, n)}, users)
        return w

    def recording(self, phase: str, n: int) -> float:
        """Seconds of what it hears each browser records in a window of `phase` and `n` samples."""
        if self.cfg.audio_windows != "all" and phase != "target":
            return 0.0
        return min(self.cfg.audio_seconds, (n - 1) * self.cfg.sample_interval)

    def capture(self, phase: str, window: int) -> None:
        """Every live participant encodes `quality_frames` frames of each remote video as PNG."""
        count = self.cfg.quality_frames
        expected = 0
        for p in self.participants:
            if p.failed or p.browser is None:   # a synthetic participant decodes nothing
                continue
            peers = [q.id for q in self.participants if q.room == p.room and q.id != p.id and not q.failed]
            expected += len(peers) * count
            self.collector.send({"cmd": "capture", "phase": phase, "window": window, "count": count,
                                 "gap_ms": CAPTURE_GAP_S * 1000, "peers": peers,
                                 "participants": self.status.participants}, [p.id])
        deadline = time.monotonic() + count * CAPTURE_GAP_S + 10
        while self.collector.captured[window] < expected and time.monotonic() < deadline:
            self.wait(0.1)

    def read_probes(self, phase: str, window: int, edge: str, participants: int | None = None) -> None:
        for probe in self.probes:
            row = probe.sample(phase=phase, window=window, edge=edge,
                               participants=self.status.participants if participants is None else participants)
            if row is None:   # a remote probe that did not answer: the window lacks its row
                self.say(f"probe: {probe.role} did not answer ({probe.error})")
                continue
            self.bus.emit("server", row)
            if probe.role == "sfu" and phase == "ramp":
                self.note_sfu_used(row, edge)
            offset = row.get("clock_offset_ms")
            if offset is not None and abs(offset) - row.get("clock_error_ms", 0) > OFFSET_TOLERANCE_MS \
                    and probe.role not in self.clocks_flagged:
                self.clocks_flagged.add(probe.role)
                self.event("clock_offset", role=probe.role, ms=offset)
                self.say(f"clocks: a {probe.role} host's clock is {offset:+.0f} ms from the runner's (beyond "
                         f"{OFFSET_TOLERANCE_MS:g} ms): its delays and window edges are off by as much; sync "
                         "them with NTP")

    def end_background(self) -> None:
        """Closes the background window once its sample is in, or SAMPLE_GRACE_S after it was due: a
        step that begins just after a background tick must not lose the tick's sample."""
        w = self.background
        if w is None:
            return
        deadline = time.monotonic() + (w.opened - time.time()) + SAMPLE_GRACE_S
        while not w.complete and time.monotonic() < deadline:
            self.check()
            time.sleep(0.05)
        self.collector.close_window(w, self._discarded(self.background_steps))
        self.background = None

    def wait(self, seconds: float) -> None:
        """Sleeps, starting background samples when they fall due."""
        end = time.monotonic() + seconds
        while True:
            self.check()
            now = time.monotonic()
            if self.next_background is not None and now >= self.next_background:
                self.end_background()
                self.background, self.background_steps = self.schedule("background", 1), len(self.steps)
                self.read_probes("background", self.window, "tick")
                self.next_background = time.monotonic() + self.cfg.background_interval
                continue
            if now >= end:
                return
            until = end if self.next_background is None else min(end, self.next_background)
            time.sleep(max(0.0, min(until - now, POLL_S)))

    def close(self) -> None:
        self.browsers.close()
