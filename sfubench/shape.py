"""Load shapes, locust-style: a small class whose tick() says how many participants the run should
have next, or None when it is done (and `done` then says why). The runner adds participants room by
room and calls tick() again once the new ones are validated and measured. A step may also run under
another network profile (`network`, a profile name; None: the run's own) and be measured as a
`network` window instead of a ramp-up one. Shapes are chosen by name (`--shape`); each takes its own
settings from the config."""
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
    network: str | None = None   # the profile the step tick() asked for runs under; None: the run's
    phase = "ramp"               # how the step is measured: "ramp" or "network"

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


@dataclass
class Degrade(LoadShape):
    """The study's ramp to `rooms` rooms under the run's network, then one step per profile of
    `profiles`: the same participants measured under each (a `network` window), worst last; the run's
    own network comes back for the target measurement."""
    rooms: int
    users_per_room: int
    profiles: tuple[str, ...]
    name = "degrade"

    @classmethod
    def from_config(cls, cfg, knee) -> "Degrade":
        return cls(cfg.rooms, cfg.users_per_room, cfg.degrade_profiles)

    def tick(self, status: Status) -> int | None:
        if status.rooms < self.rooms:
            return (status.rooms + 1) * self.users_per_room
        step = self.profiles.index(self.network) + 1 if self.network in self.profiles else 0
        if step >= len(self.profiles):
            self.network, self.phase = None, "ramp"
            self.done = f"{self.rooms} room(s) measured under {len(self.profiles)} network profile(s)"
            return None
        self.network, self.phase = self.profiles[step], "network"
        return status.participants


SHAPES: dict[str, type] = {s.name: s for s in (RoomRamp, UntilKnee, Degrade)}


def from_config(cfg, knee: Callable[[], object]) -> LoadShape:
    """The shape `cfg.shape` names; `knee()` reads the knee so far, for shapes that stop on it."""
    return SHAPES[cfg.shape].from_config(cfg, knee)
