"""Join storms, as at nine o'clock: a background of --rooms rooms joins and is measured (its browsers
with it), then storms of synthetic participants, each storm's all joining at once into rooms of their
own, inside a window that measures the background while they join: --first-storm participants, then
twice as many at each storm, until the storm knee (reports/storm.py) is confirmed by the storm after
it, the clients become the limit, --max-storm or --ramp-minutes. Each storm's participants leave
before the next one comes, so every storm lands on the same background."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from reports.knee import stop_reason

from ..settings import AUTO, opt
from . import LoadShape, Status, Step
from .until_knee import RAMP_BOUND, UntilKnee


@dataclass
class JoinStorm(LoadShape):
    """a background of rooms, then storms of participants all joining at once, each twice the last, until the storm knee, the clients' limit, --max-storm or --ramp-minutes"""
    background: int          # participants of the rooms already running
    first: int
    most: int
    within: float            # s a storm's newcomers have for their videos to play
    knee: Callable[[], object]
    ramp_minutes: float = float("inf")
    clock: Callable[[], float] = time.monotonic
    size: int = field(default=0, init=False)              # the last storm's
    started: float | None = field(default=None, init=False)
    name = "join-storm"
    options = {
        "ramp_minutes": UntilKnee.options["ramp_minutes"],
        "first_storm": opt(14, "participants the join-storm shape's first storm brings, all joining at once "
                           "(each storm after it brings twice as many)", min=1, max=1000),
        "max_storm": opt(448, "the largest storm the join-storm shape brings", min=1, max=5000),
        "storm_timeout": opt(10.0, "seconds a storm's participants have for every video of theirs to play: a "
                             "join that takes longer counts as failed", min=1, max=120, kind="float"),
    }

    @classmethod
    def from_config(cls, cfg, knee) -> "JoinStorm":
        return cls(cfg.rooms * cfg.users_per_room, cfg.first_storm, cfg.max_storm, cfg.storm_timeout, knee,
                   cfg.ramp_minutes or float("inf"))

    @classmethod
    def rooms_cap(cls, cfg) -> int:
        return cfg.rooms + -(-cfg.max_storm // cfg.users_per_room)

    @classmethod
    def adopt(cls, values: dict, given: set[str]) -> dict:
        """Browsers only in the background's rooms: a storm is of synthetic participants."""
        real = values["rooms"] if values["real_rooms"] == AUTO else min(values["real_rooms"], values["rooms"])
        return {**values, "real_rooms": real}

    def tick(self, status: Status) -> Step | None:
        now = self.clock()
        if self.started is None:
            self.started = now
        if not status.participants:
            return Step(self.background)
        found = self.knee()
        if found.participants is not None and (found.client_bound or found.participants < status.participants):
            self.done = stop_reason(found)
            return None
        if (why := self.bound(now)) is not None:
            self.done = why
            return None
        self.size = min(self.most, self.size * 2) if self.size else min(self.most, self.first)
        return Step(self.background + self.size, phase="storm", fresh_from=self.background, within=self.within)

    def bound(self, now: float) -> str | None:
        """Why no more storms come, if none does."""
        if self.size >= self.most:
            return f"no storm knee up to --max-storm {self.most}"
        if now - self.started >= self.ramp_minutes * 60:
            return f"{RAMP_BOUND} {self.ramp_minutes:g} (storms up to {self.size} participants)"
        return None
