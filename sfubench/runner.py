"""The scenario: the study's room-by-room ramp, driven through WebDriver sessions on a grid.

For each step of the load shape: start a room's participants, verify every video of the room is
playing (or let its check time out), take a ramp-up measurement, go on. At target load take the
target measurement. A background sampler runs through everything. The runner is single-threaded:
WebDriver sessions are not safe to share between threads, so background sampling happens inside
the runner's own waits.
"""
from __future__ import annotations

import base64
import io
import time
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from selenium.common.exceptions import WebDriverException

from quality import check as video_check

from .progress import Progress
from .rundir import RunDir
from .shape import LoadShape, Status

CHECK_GAP = 0.6  # s between the two frames a check compares: over the 0.5 s a frozen frame needs


@dataclass(eq=False)
class Participant:
    id: str
    room: int
    browser: "Browser"
    failed: str | None = None


LOST_AFTER = 3  # consecutive failed calls after which a browser is given up


@dataclass(eq=False)
class Browser:
    index: int
    driver: object
    participants: list[Participant] = field(default_factory=list)
    failures: int = 0

    def call(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    @property
    def lost(self) -> bool:
        return self.failures >= LOST_AFTER

    def attempt(self, runner: "Runner", what: str, fn, *args):
        """Runs a call on this browser. An overloaded or dead browser is a result of the run (the
        events say which calls failed), not a reason to stop measuring the others; after
        LOST_AFTER failures in a row it is given up, so one stuck browser cannot stretch the run by
        a script timeout per call."""
        if self.lost:
            return None
        try:
            result = fn(*args)
        except WebDriverException as e:
            self.failures += 1
            reason = (e.msg or type(e).__name__).strip().splitlines()[0]
            runner.event("browser_error", browser=self.index, call=what, reason=reason)
            runner.progress.say(f"browser {self.index}: {what} failed: {reason}")
            if self.lost:
                runner.browser_lost(self)
            return None
        self.failures = 0
        return result

    def add(self, p: Participant, url: str) -> None:
        self.call("sfubenchHost.add(arguments[0], arguments[1])", p.id, url)
        self.participants.append(p)

    def states(self) -> dict:
        return self.call("return sfubenchHost.states()")

    def stats(self) -> dict:
        return self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "sfubenchHost.stats().then(done, (e) => done({}));")

    def capture(self, requests: dict[str, list[str]]) -> dict[tuple[str, str], tuple[float, str | None]]:
        """(participant, video user) -> (time in s, PNG data URL or None), all drawn at once."""
        r = self.call("return sfubenchHost.capture(arguments[0])", requests)
        return {(p_id, user): (shot["t"] / 1000.0, shot["png"])
                for p_id, videos in r.items() for user, shot in videos.items()}


def decode_png(data_url: str | None) -> np.ndarray | None:
    if not data_url:
        return None
    raw = base64.b64decode(data_url.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))


class Runner:
    """Runs one scenario. `open_browser()` returns a WebDriver already showing the host page;
    `client_url(room, user)` gives a participant's page; `probes` (CpuProbe) are read at both
    edges of every measurement and at every background tick."""

    def __init__(self, cfg, shape: LoadShape, run: RunDir, open_browser, client_url, media,
                 scorer=None, probes=(), progress: Progress | None = None, outputs=()):
        self.cfg = cfg
        self.shape = shape
        self.run = run
        self.open_browser = open_browser
        self.client_url = client_url
        self.media = media
        self.scorer = scorer
        self.probes = list(probes)
        self.outputs = list(outputs)   # callables(samples, participants), after the run folder
        self.progress = progress or Progress()
        self.browsers: list[Browser] = []
        self.participants: list[Participant] = []
        self.status = Status()
        self.window = 0
        self.next_background = None

    # -- the scenario ----------------------------------------------------------------------------
    def run_scenario(self) -> None:
        if self.cfg.background_interval > 0:
            self.next_background = time.monotonic() + self.cfg.background_interval
        while (want := self.shape.tick(self.status)) is not None:
            new_rooms = []
            while self.status.participants < want:
                room = self.status.participants // self.cfg.users_per_room + 1
                if room not in new_rooms:
                    new_rooms.append(room)
                    self.status.rooms = room
                    self.event("room_started", room=room)
                self.start_participant(room)
            for room in new_rooms:
                self.validate(room)
            self.measure("ramp", self.cfg.ramp_samples)
        self.event("target_reached")
        self.measure("target", self.cfg.target_samples)

    def start_participant(self, room: int) -> None:
        index = self.status.participants % self.cfg.users_per_room + 1
        p_id = f"r{room}u{index}"
        if not self.browsers or len(self.browsers[-1].participants) >= self.cfg.participants_per_browser:
            self.progress.say(f"browser {len(self.browsers) + 1}: opening a session")
            self.browsers.append(Browser(len(self.browsers) + 1, self.open_browser()))
        browser = self.browsers[-1]
        p = Participant(p_id, room, browser)
        browser.add(p, self.client_url(room, p_id))
        self.participants.append(p)
        self.status.participants += 1
        self.event("participant_started", room=room, user=p_id)
        self.progress.say(f"room {room}/{self.cfg.rooms}: {p_id} joining "
                          f"({self.status.participants} participants)")

    def validate(self, room: int) -> None:
        """Checks every video of the room (each participant's own preview and every remote) until
        it is verified playing or the per-video timeout passes."""
        members = [p for p in self.participants if p.room == room]
        users = [p.id for p in members]
        pending = {(p.id, u): "missing" for p in members for u in users}
        by_id = {p.id: p for p in members}
        started = time.monotonic()
        deadline = started + self.cfg.video_timeout
        total = len(pending)
        while pending and time.monotonic() < deadline:
            if all(by_id[p_id].browser.lost for p_id, _ in pending):
                break
            self.note_failures(members)
            if self.scorer:
                self.scorer.follow(self)   # samplers warm up while videos appear, before measuring
            first = self.capture_pending(pending, by_id)
            time.sleep(CHECK_GAP)  # not self.wait: a background sample here would stretch the gap
            second = self.capture_pending(pending, by_id)
            for key in list(pending):
                a, b = first.get(key), second.get(key)
                if a is None or b is None or a[1] is None or b[1] is None:
                    pending[key] = "missing"
                    continue
                verdict = video_check.classify([a, b], self.media.layout)
                pending[key] = verdict
                if verdict == "playing":
                    del pending[key]
                    self.record_check(room, key, True, verdict, time.monotonic() - started)
            self.progress.say(f"room {room}/{self.cfg.rooms}: checks {total - len(pending)}/{total} "
                              f"playing", transient=True)
            if pending:
                self.wait(0.5)
        for key, verdict in pending.items():
            self.record_check(room, key, False, verdict, time.monotonic() - started)
        ok = total - len(pending)
        self.event("room_validated" if not pending else "room_timeout", room=room)
        self.progress.say(f"room {room}/{self.cfg.rooms}: {ok}/{total} videos playing"
                          + ("" if not pending else f"; {len(pending)} timed out after "
                             f"{self.cfg.video_timeout:.0f} s"))

    def capture_pending(self, pending, by_id) -> dict:
        requests: dict[Browser, dict[str, list[str]]] = {}
        for p_id, user in pending:
            p = by_id[p_id]
            requests.setdefault(p.browser, {}).setdefault(p_id, []).append(user)
        out = {}
        for browser, req in requests.items():
            shots = browser.attempt(self, "capture", browser.capture, req) or {}
            for key, (t, url) in shots.items():
                out[key] = (t, decode_png(url))
        return out

    def note_failures(self, members) -> None:
        for browser in {p.browser.index: p.browser for p in members}.values():
            states = browser.attempt(self, "states", browser.states) or {}
            for p in browser.participants:
                s = states.get(p.id, {})
                if s.get("state") == "failed" and not p.failed:
                    p.failed = s.get("reason") or "unknown"
                    self.event("participant_failed", room=p.room, user=p.id, reason=p.failed)
                    self.progress.say(f"{p.id} failed: {p.failed}")

    def browser_lost(self, browser: Browser) -> None:
        reason = f"browser {browser.index} stopped answering ({LOST_AFTER} calls failed in a row)"
        self.progress.say(f"{reason}: its {len(browser.participants)} participants count as failed")
        for p in browser.participants:
            if not p.failed:
                p.failed = reason
                self.event("participant_failed", room=p.room, user=p.id, reason=reason)

    def record_check(self, room, key, ok, verdict, elapsed) -> None:
        p_id, user = key
        self.run.append("checks", {"room": room, "user": p_id, "peer": user, "ok": ok,
                                   "verdict": verdict, "elapsed": round(elapsed, 2)})

    # -- measuring -------------------------------------------------------------------------------
    def measure(self, phase: str, n: int) -> None:
        self.window += 1
        window = self.window
        self.read_probes(phase, window, "start")
        if self.scorer:
            self.scorer.follow(self)
        for i in range(n):
            self.sample(phase, window)
            if self.scorer and i == n - 1:
                self.scorer.capture(self, phase, window)
            if i < n - 1:
                self.wait(self.cfg.sample_interval)
        self.read_probes(phase, window, "end")
        self.progress.say(f"{phase}: {n} samples at {self.status.participants} participants")

    def sample(self, phase: str, window: int) -> None:
        taken = []
        for browser in self.browsers:
            by_participant = browser.attempt(self, "stats", browser.stats) or {}
            for p in browser.participants:
                for s in by_participant.get(p.id, []):
                    s.update(phase=phase, window=window, participants=self.status.participants,
                             room=p.room, user=p.id)
                    self.run.append("samples", s)
                    taken.append(s)
        for output in self.outputs:
            output(taken, self.status.participants)

    def read_probes(self, phase: str, window: int, edge: str) -> None:
        for probe in self.probes:
            self.run.append("server", probe.sample(phase=phase, window=window, edge=edge,
                                                   participants=self.status.participants))

    def wait(self, seconds: float) -> None:
        """Sleeps, taking background samples when they fall due."""
        end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if self.next_background is not None and now >= self.next_background:
                self.window += 1
                self.sample("background", self.window)
                self.read_probes("background", self.window, "tick")
                self.next_background = time.monotonic() + self.cfg.background_interval
                continue
            if now >= end:
                return
            until = end if self.next_background is None else min(end, self.next_background)
            time.sleep(max(0.0, min(until - now, 0.25)))

    def event(self, name: str, **fields) -> None:
        self.run.append("events", {"event": name, "participants": self.status.participants,
                                   "room": fields.pop("room", None), **fields})

    def close(self) -> None:
        for b in self.browsers:
            try:
                b.driver.quit()
            except Exception:  # a dead session must not stop the others from closing
                pass
        self.browsers.clear()
