"""A planned restart: --rooms rooms join, are validated and measured (hold them below the SFU's knee);
then the site stops the SFU and starts it again, as a deployment's supervisor would for an upgrade,
and every participant whose session ended rejoins as its SFU's official client does (the adapter's
`reconnect_s`; --reconnect false: none does); each participant's video is timed back for up to
--recovery-timeout s; the rooms are then measured again. The restart is an event of the run: an SFU
that dies unplanned still fails it.

Its network variant (--outage link): the SFU stays up and the clients' link is cut both ways for
--outage-seconds (the link emulator's partition profile), past the 30 s after which Chrome's ICE
gives up on a pair that no longer answers its consent checks; then it comes back, and each
participant's video is timed back from then: by the client's own ICE restart where it makes one
(counted from the browsers' transport stats), else by rejoining as above."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..settings import opt
from . import LoadShape, Status, Step

CUT = "partition"   # networks.toml: every packet lost, both ways


@dataclass
class Restart(LoadShape):
    """--rooms rooms joined and measured, then the SFU restarted (planned) or the clients' link cut (--outage link) and every participant's video timed back, then measured again"""
    rooms: int
    users_per_room: int
    reconnect: bool = True
    recovery_timeout: float = 60.0
    cut_s: float = 0.0   # the link's outage; 0: the SFU is restarted
    restarted: bool = field(default=False, init=False)
    name = "restart"
    options = {
        "reconnect": opt(True, "after a planned restart (the restart shape), participants whose session ended "
                         "rejoin with their adapter's backoff (sfu.toml reconnect_s); false: none does"),
        "recovery_timeout": opt(60.0, "seconds the restart shape waits for every participant's video to come "
                                "back after a planned restart of the SFU", min=10, max=600, kind="float"),
        "outage": opt("sfu", "what the restart shape takes down: sfu (restarted, as for an upgrade) or link (the "
                      "clients' link cut both ways for --outage-seconds, then back)", choices=("sfu", "link")),
        "outage_seconds": opt(40.0, "how long --outage link cuts the clients' link: past the 30 s after which "
                              "Chrome's ICE fails a pair that no longer answers", min=1, max=300, kind="float"),
    }

    @classmethod
    def from_config(cls, cfg, knee) -> "Restart":
        return cls(cfg.rooms, cfg.users_per_room, cfg.reconnect, cfg.recovery_timeout,
                   cfg.outage_seconds if cfg.outage == "link" else 0.0)

    @classmethod
    def networks(cls, cfg) -> tuple[str, ...]:
        return (CUT,) if cfg.outage == "link" else ()

    def tick(self, status: Status) -> Step | None:
        if not status.participants:
            return Step(self.rooms * self.users_per_room)
        if not self.restarted:
            self.restarted = True
            return Step(status.participants, phase="restart", within=self.recovery_timeout, rejoin=self.reconnect,
                        network=CUT if self.cut_s else None, cut_s=self.cut_s)
        self.done = "the clients' link was cut once" if self.cut_s else "the SFU was restarted once"
        return None
