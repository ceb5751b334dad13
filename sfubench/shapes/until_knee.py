"""One more room per step until the knee rule names the SFU's knee, confirmed by the step after it
(so the run ends one step past the knee), or the count where the clients became the limit (more load
would only tell more about them), or --max-rooms is reached."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reports.knee import stop_reason

from ..settings import opt
from . import LoadShape, Status, Step


@dataclass
class UntilKnee(LoadShape):
    """a room at a time until the knee rule fires, the clients become the limit, or --max-rooms"""
    max_rooms: int
    users_per_room: int
    knee: Callable[[], object]   # -> reports.knee.Knee over what the run folder holds so far
    name = "until-knee"
    options = {"max_rooms": opt(40, "the most rooms the until-knee shape adds", min=1, max=1000)}

    @classmethod
    def from_config(cls, cfg, knee) -> "UntilKnee":
        return cls(cfg.max_rooms, cfg.users_per_room, knee)

    @classmethod
    def rooms_cap(cls, cfg) -> int:
        return cfg.max_rooms

    def tick(self, status: Status) -> Step | None:
        if status.rooms:
            found = self.knee()
            # The rule also fires on the last count measured, with nothing after it to confirm it.
            if found.participants is not None and (found.client_bound or found.participants < status.participants):
                self.done = stop_reason(found)
                return None
        if status.rooms >= self.max_rooms:
            self.done = f"no knee up to --max-rooms {self.max_rooms}"
            return None
        return Step((status.rooms + 1) * self.users_per_room)
