"""Load shapes, locust-style: a small class whose tick() says how many participants the run should
have next, or None when the target load is reached. The runner adds participants room by room and
calls tick() again once the new ones are validated and measured."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Status:
    participants: int = 0
    rooms: int = 0


class LoadShape:
    def tick(self, status: Status) -> int | None:
        raise NotImplementedError


@dataclass
class RoomRamp(LoadShape):
    """The study's ramp: one more full room per step, up to `rooms` rooms."""
    rooms: int
    users_per_room: int

    def tick(self, status: Status) -> int | None:
        if status.rooms >= self.rooms:
            return None
        return (status.rooms + 1) * self.users_per_room
