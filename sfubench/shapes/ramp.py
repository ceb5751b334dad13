"""The study's ramp: one more full room per step, up to --rooms rooms."""
from __future__ import annotations

from dataclasses import dataclass

from . import LoadShape, Status, Step


@dataclass
class RoomRamp(LoadShape):
    """a room at a time, up to --rooms"""
    rooms: int
    users_per_room: int
    name = "ramp"

    @classmethod
    def from_config(cls, cfg, knee) -> "RoomRamp":
        return cls(cfg.rooms, cfg.users_per_room)

    def tick(self, status: Status) -> Step | None:
        if status.rooms >= self.rooms:
            self.done = f"{self.rooms} room(s) reached"
            return None
        return Step((status.rooms + 1) * self.users_per_room)
