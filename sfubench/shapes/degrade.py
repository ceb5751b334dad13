"""The study's ramp to --rooms rooms under the run's network, then one step per profile of
--degrade: the same participants measured under each (a `network` window), worst last; the run's
own network comes back for the target measurement."""
from __future__ import annotations

from dataclasses import dataclass

from ..settings import ConfigError, opt
from . import LoadShape, Status, Step


@dataclass
class Degrade(LoadShape):
    """the ramp, then the same load under each --degrade network profile"""
    rooms: int
    users_per_room: int
    profiles: tuple[str, ...]
    name = "degrade"
    options = {"degrade": opt("", "the degrade shape's network profiles, in order (names or .toml files, "
                              "comma-separated): after the ramp, the same participants are measured under each",
                              metavar="NAME,...")}
    step: int = 0

    @classmethod
    def from_config(cls, cfg, knee) -> "Degrade":
        return cls(cfg.rooms, cfg.users_per_room, cls.networks(cfg))

    @classmethod
    def networks(cls, cfg) -> tuple[str, ...]:
        profiles = tuple(p.strip() for p in cfg.degrade.split(",") if p.strip())
        if not profiles or "none" in profiles:
            raise ConfigError("--shape degrade needs --degrade: the network profiles to measure under, in "
                              "order (names or .toml files, comma-separated; not none)")
        return profiles

    def tick(self, status: Status) -> Step | None:
        if status.rooms < self.rooms:
            return Step((status.rooms + 1) * self.users_per_room)
        if self.step >= len(self.profiles):
            self.done = f"{self.rooms} room(s) measured under {len(self.profiles)} network profile(s)"
            return None
        self.step += 1
        return Step(status.participants, self.profiles[self.step - 1], "network")
