"""One more room per step until the knee rule names the SFU's knee, confirmed by the step after it
and again by that step measured once more, or the count where the clients became the limit (more
load would only tell more about them), or a bound: --max-rooms, or --ramp-minutes of ramping (an
SFU that copes with more takes longer to ramp: the bound keeps a default run within its 10 minutes).
A confirmed knee is then narrowed down within its room: the ramp goes back to the middle of the
bracket (the last count that coped, the knee), participants leaving or joining again, and measures
there, until the bracket is --knee-resolution participants wide (so two SFUs a few participants
apart are not level by construction of a room's step).

Why measure the confirming step twice: at an SFU's edge one window of a step can read bad and the
next good (a study's Janus run stopped on a knee at 49 participants, frozen video at 49 and 56,
that the target's windows at 56 took back), and a run that stopped on a knee its last windows then
take back ends unconfirmed, with nothing measured past it. The second window either holds the knee,
and the run stops, or takes it back and the ramp goes on. Where a bound ends the ramp anyway, there
is nothing to go on to, and the knee is not measured again (nor does the run outgrow its minutes),
nor narrowed down.

A shape whose steps are large (a broadcast's grow by a quarter) overloads an SFU deeply on the steps
that find and confirm its knee, and an SFU that queued seconds of media and retransmissions meanwhile
may still be draining them at counts it coped with on the way up: a knee narrowed down from there
would be the backlog's. Such a shape (`recover_share`) first takes the run down to that share of the
count that coped and holds it until the SFU has spare CPU again (phases.recover), then measures the
narrowing step as the ramp reached it, from below."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from reports.knee import stop_reason

from ..settings import AUTO, opt
from . import LoadShape, Status, Step

RAMP_BOUND = "no knee confirmed within --ramp-minutes"   # how a run stopped by the time bound says so
# The local lab's bound ("auto"): a step after it may still be a room a saturated SFU cannot take
# whole (up to --video-timeout), then measured, then the target window and the teardown: about 105 s
# here, so a default run ends under its 10 minutes. A remote site's hosts ramp as far as they carry.
LAB_RAMP_MINUTES = 8.0
# Seconds a recovery before a narrowing step may hold the run down (phases.recover)
RECOVER_S = 60.0


@dataclass
class UntilKnee(LoadShape):
    """a room at a time until the knee rule fires, the clients become the limit, --max-rooms or --ramp-minutes"""
    max_rooms: int
    users_per_room: int
    knee: Callable[[], object]   # -> reports.knee.Knee over what the run folder holds so far
    ramp_minutes: float = float("inf")
    clock: Callable[[], float] = time.monotonic
    resolution: int = 2          # participants: a knee's bracket is narrowed down to this width
    started: float | None = field(default=None, init=False)   # the first tick: the ramp's start
    remeasured: int | None = field(default=None, init=False)  # the count measured again on a knee
    measured: set = field(default_factory=set, init=False)    # the counts of every step so far
    narrowing: bool = field(default=False, init=False)        # the knee is confirmed: bisecting
    recovered_for: int | None = field(default=None, init=False)  # the narrowing count a recovery preceded
    recover_share = 0.0   # of the count that coped, where a narrowing step down first recovers; 0: none
    name = "until-knee"
    options = {
        "max_rooms": opt(40, "the most rooms the until-knee shape adds", min=1, max=1000),
        # Not a scenario key: each step is put through the same whatever the bound, which only ends
        # the ramp sooner (and runs made before it existed stay comparable).
        "knee_resolution": opt(2, "participants the until-knee shape narrows a confirmed knee down to, by "
                               "measuring again within its room between the last count that coped and the "
                               "knee (participants leave or join again); at least a room's size: not "
                               "narrowed", min=1, max=64),
        "ramp_minutes": opt(AUTO, "minutes after which the until-knee shape adds no room (its last step "
                            "and the target window still run); 0: no bound. auto: "
                            f"{LAB_RAMP_MINUTES:g} in the local lab (a default run under 10 minutes), "
                            "none on a remote site", min=0, max=24 * 60, kind="float", scenario=False),
    }

    @classmethod
    def from_config(cls, cfg, knee) -> "UntilKnee":
        return cls(cfg.max_rooms, cfg.users_per_room, knee, cfg.ramp_minutes or float("inf"), resolution=cfg.knee_resolution)

    @classmethod
    def rooms_cap(cls, cfg) -> int:
        return cfg.max_rooms

    @classmethod
    def adopt(cls, values: dict, given: set[str]) -> dict:
        """--rooms N (the Makefile's ROOMS) is at most N rooms here: never ignored."""
        if "rooms" in given:
            return {**values, "max_rooms": min(values["max_rooms"], values["rooms"])}
        return values

    def tick(self, status: Status) -> Step | None:
        now = self.clock()
        if self.started is None:
            self.started = now
        bound = self.bound(status, now)
        if status.rooms:
            found = self.knee()
            if self.narrowing:
                return self.step(self.narrow(found, bound is not None, status))
            # The rule also fires on the last count measured, with nothing after it to confirm it.
            if found.participants is not None and (found.client_bound or found.participants < status.participants):
                if found.client_bound or bound:
                    return self.stop(found)
                if self.remeasured == status.participants:
                    self.narrowing = True
                    return self.step(self.narrow(found, False, status))
                self.remeasured = status.participants
                return self.step(Step(status.participants, reason=f"measuring {status.participants} participants "
                                                                 f"again before stopping on the knee at {found.participants}"))
        if bound:
            self.done = bound
            return None
        return self.step(Step(self.next_count(status)))

    def next_count(self, status: Status) -> int:
        """The count of the ramp's next step: one more room."""
        return (status.rooms + 1) * self.users_per_room

    def at_most(self, status: Status) -> str | None:
        """Why the ramp has grown as far as its settings let it, if it has."""
        if status.rooms >= self.max_rooms:
            return f"no knee up to --max-rooms {self.max_rooms}"
        return None

    def step(self, step: Step | None) -> Step | None:
        if step is not None and step.phase != "recover":   # a recovery measures nothing
            self.measured.add(step.participants)
        return step

    def stop(self, found) -> None:
        self.done = stop_reason(found)
        return None

    def narrow(self, found, bounded: bool, status: Status) -> Step | None:
        """The next count within the knee's bracket, or None (done) once it is narrow enough, a
        bound has passed, or the knee is gone or client-bound (said as such)."""
        if found.participants is None or found.client_bound:
            self.done = stop_reason(found) if found.client_bound else \
                "the knee was taken back by the windows measured since it was found"
            return None
        below = found.coped   # the most participants judged below the knee
        if below is None or found.participants - below <= self.resolution:
            return self.stop(found)
        middle = (below + found.participants) // 2
        if middle in self.measured:   # and left unjudged: its clients were strained (reports/knee.py)
            self.done = (f"{stop_reason(found)} (narrowed down to {below}-{found.participants}: the clients "
                         f"were strained at {middle})")
            return None
        recover = self.recover_share and status.participants > middle and self.recovered_for != middle
        # a recovery the ramp's minutes would end leaves the run held down, its target measured there
        if bounded or (recover and self.clock() - self.started + RECOVER_S >= self.ramp_minutes * 60):
            # said, so that a knee narrowed less than asked is not taken for one narrowed down
            self.done = (f"{stop_reason(found)} (narrowed down to {below}-{found.participants} when the "
                         "ramp's minutes were up)")
            return None
        if recover:
            self.recovered_for = middle
            low = self.recovery_count(below)
            return Step(low, phase="recover", within=RECOVER_S,
                        reason=f"back to {low} participants until the SFU has spare CPU again, before "
                               f"narrowing the knee down from below")
        return Step(middle, reason=f"narrowing the knee down: {below} coped, {found.participants} did not; "
                                   f"measuring {middle}")

    def recovery_count(self, coped: int) -> int:
        """Where a narrowing step down recovers first: `recover_share` of the count that coped."""
        return max(1, int(coped * self.recover_share))

    def bound(self, status: Status, now: float) -> str | None:
        """Why the ramp may add no more rooms, if it may not."""
        if (most := self.at_most(status)) is not None:
            return most
        if now - self.started >= self.ramp_minutes * 60:
            return f"{RAMP_BOUND} {self.ramp_minutes:g} (up to {status.participants} participants)"
        return None
