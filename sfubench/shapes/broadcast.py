"""A broadcast: one room, its publishers (--publishers-per-room, the first participants) and viewers
who only watch, added step after step until the knee rule names the SFU's knee, with the until-knee
shape's rules: the knee confirmed by the step after it measured twice, then narrowed down within its
step; the clients' limit, --max-viewers or --ramp-minutes end it too. A step adds --viewer-step
viewers, or a quarter of those already watching where that is more, so that a ramp reaches an SFU
that carries hundreds within its minutes and still brackets a small knee closely."""
from __future__ import annotations

from dataclasses import dataclass

from ..settings import ConfigError, opt
from . import Status
from .until_knee import UntilKnee


@dataclass
class Broadcast(UntilKnee):
    """one room of publishers and viewers added step by step until the knee rule fires, the clients become the limit, --max-viewers or --ramp-minutes"""
    publishers: int = 1
    viewer_step: int = 8
    max_viewers: int = 500
    # a step of a quarter more viewers overloads an SFU past its knee by as much: narrowing recovers
    # at half the viewers that coped first (until_knee.py)
    recover_share = 0.5
    name = "broadcast"
    options = {
        **{k: v for k, v in UntilKnee.options.items() if k != "max_rooms"},
        "viewer_step": opt(8, "viewers the broadcast shape adds at each step, at least (a quarter of those "
                           "already watching where that is more)", min=1, max=1000),
        "max_viewers": opt(500, "the most viewers the broadcast shape adds", min=1, max=1000),
    }

    @classmethod
    def from_config(cls, cfg, knee) -> "Broadcast":
        return cls(1, cfg.users_per_room, knee, cfg.ramp_minutes or float("inf"), resolution=cfg.knee_resolution,
                   publishers=max(1, cfg.publishers_per_room), viewer_step=cfg.viewer_step,
                   max_viewers=cfg.max_viewers)

    @classmethod
    def rooms_cap(cls, cfg) -> int:
        return 1

    @classmethod
    def adopt(cls, values: dict, given: set[str]) -> dict:
        """The room holds every participant the ramp may add; at least one of them publishes. --rooms
        is refused, not ignored: there is one room."""
        if "rooms" in given:
            raise ConfigError("--rooms: the broadcast shape holds one room (--max-viewers bounds its viewers)")
        publishers = max(1, values["publishers_per_room"])
        return {**values, "publishers_per_room": publishers, "users_per_room": publishers + values["max_viewers"]}

    def viewers(self, status: Status) -> int:
        return max(0, status.participants - self.publishers)

    def recovery_count(self, coped: int) -> int:
        return self.publishers + (coped - self.publishers) // 2

    def next_count(self, status: Status) -> int:
        viewers = self.viewers(status)
        return self.publishers + min(self.max_viewers, viewers + max(self.viewer_step, viewers // 4))

    def at_most(self, status: Status) -> str | None:
        if self.viewers(status) >= self.max_viewers:
            return f"no knee up to --max-viewers {self.max_viewers}"
        return None
