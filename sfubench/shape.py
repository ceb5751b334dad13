"""Load shapes, locust-style: a small class whose tick() says how many participants the run should
have next, or None when it is done (and `done` then says why). The runner adds participants room by
room and calls tick() again once the new ones are validated and measured. Shapes are chosen by name
(`--shape`); each takes its own settings from the config."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Status:
    participants: int = 0
    rooms: int = 0


class LoadShape:
    name = ""
    done: str | None = None      # why the last tick() ended the run

    def tick(self, status: Status) -> int | None:
        raise NotImplementedError


@dataclass
class RoomRamp(LoadShape):
    """The study's ramp: one more full room per step, up to `rooms` rooms."""
    rooms: int
    users_per_room: int
    name = "ramp"

    @classmethod
    def from_config(cls, cfg, knee) -> "RoomRamp":
        return cls(cfg.rooms, cfg.users_per_room)

    def tick(self, status: Status) -> int | None:
        if status.rooms >= self.rooms:
            self.done = f"{self.rooms} room(s) reached"
            return None
        return (status.rooms + 1) * self.users_per_room


@dataclass
class UntilKnee(LoadShape):
    """One more room per step until `knee()` (the knee rule over what the run folder holds so far)
    names the SFU's knee, confirmed by the step after it as the rule wants (so the run ends one step
    past the knee), or the count where the clients became the limit (more load would only tell
    more about them), or `max_rooms` is reached."""
    max_rooms: int
    users_per_room: int
    knee: Callable[[], object]   # -> reports.knee.Knee
    name = "until-knee"

    @classmethod
    def from_config(cls, cfg, knee) -> "UntilKnee":
        return cls(cfg.max_rooms, cfg.users_per_room, knee)

    def tick(self, status: Status) -> int | None:
        if status.rooms:
            found = self.knee()
            # The rule also fires on the last count measured, with nothing after it to confirm it.
            if found.participants is not None and (found.client_bound or found.participants < status.participants):
                self.done = (f"knee at {found.participants} participants: {found.detail}"
                             if not found.client_bound else found.detail)
                return None
        if status.rooms >= self.max_rooms:
            self.done = f"no knee up to --max-rooms {self.max_rooms}"
            return None
        return (status.rooms + 1) * self.users_per_room


SHAPES: dict[str, type] = {s.name: s for s in (RoomRamp, UntilKnee)}


def from_config(cfg, knee: Callable[[], object]) -> LoadShape:
    """The shape `cfg.shape` names; `knee()` reads the knee so far, for shapes that stop on it."""
    return SHAPES[cfg.shape].from_config(cfg, knee)
