"""A planned restart: --rooms rooms join, are validated and measured (hold them below the SFU's knee);
then the site stops the SFU and starts it again, as a deployment's supervisor would for an upgrade,
and every participant whose session ended rejoins as its SFU's official client does (the adapter's
`reconnect_s`; --reconnect false: none does); each participant's video is timed back for up to
--recovery-timeout s; the rooms are then measured again. The restart is an event of the run: an SFU
that dies unplanned still fails it."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..settings import opt
from . import LoadShape, Status, Step


@dataclass
class Restart(LoadShape):
    """--rooms rooms joined and measured, then the SFU restarted (planned) and every participant's video timed back, then measured again"""
    rooms: int
    users_per_room: int
    reconnect: bool = True
    recovery_timeout: float = 60.0
    restarted: bool = field(default=False, init=False)
    name = "restart"
    options = {
        "reconnect": opt(True, "after a planned restart (the restart shape), participants whose session ended "
                         "rejoin with their adapter's backoff (sfu.toml reconnect_s); false: none does"),
        "recovery_timeout": opt(60.0, "seconds the restart shape waits for every participant's video to come "
                                "back after a planned restart of the SFU", min=10, max=600, kind="float"),
    }

    @classmethod
    def from_config(cls, cfg, knee) -> "Restart":
        return cls(cfg.rooms, cfg.users_per_room, cfg.reconnect, cfg.recovery_timeout)

    def tick(self, status: Status) -> Step | None:
        if not status.participants:
            return Step(self.rooms * self.users_per_room)
        if not self.restarted:
            self.restarted = True
            return Step(status.participants, phase="restart", within=self.recovery_timeout, rejoin=self.reconnect)
        self.done = "the SFU was restarted once"
        return None
