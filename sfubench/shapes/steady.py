"""A steady load: --rooms rooms joined one by one, then held for --steady-minutes, measured window
after window at the same participant count (a soak at a load the SFU copes with, or a check that a
count it copes with stays coped with)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..settings import opt
from . import LoadShape, Status, Step


@dataclass
class Steady(LoadShape):
    """--rooms rooms, then held for --steady-minutes"""
    rooms: int
    users_per_room: int
    minutes: float
    clock: Callable[[], float] = time.monotonic
    reached: float | None = field(default=None, init=False)   # when the last room was measured
    name = "steady"
    options = {"steady_minutes": opt(5.0, "how long the steady shape holds its --rooms rooms once they "
                                     "are all in, measured window after window", min=0.1, max=24 * 60)}

    @classmethod
    def from_config(cls, cfg, knee) -> "Steady":
        return cls(cfg.rooms, cfg.users_per_room, cfg.steady_minutes)

    def tick(self, status: Status) -> Step | None:
        if status.rooms < self.rooms:
            return Step((status.rooms + 1) * self.users_per_room)
        if self.reached is None:
            self.reached = self.clock()
        if self.clock() - self.reached >= self.minutes * 60:
            self.done = f"{status.participants} participants held for {self.minutes:g} min"
            return None
        return Step(status.participants)
