"""Load shapes, locust-style: one class per file of this folder, found by its `name`. Given the run's
status, a shape's tick() returns the next step (how many participants, under which network, measured
as what) or None when it is done (and `done` then says why). The runner adds participants room by
room and calls tick() again once the new ones are validated and measured (a step at the count the
run is at is measured again); it knows no shape by name.
A shape's own settings (`options`) join the schema (config.py): flags, environment, file and docs.

A new shape is a new file here: a LoadShape subclass with a `name`, its `options`, `from_config` and
`tick`; nothing else changes."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import plugins


@dataclass
class Status:
    participants: int = 0
    rooms: int = 0


@dataclass(frozen=True)
class Step:
    participants: int
    network: str | None = None   # the profile the step runs under; None: the run's own
    phase: str = "ramp"          # how the step is measured: "ramp", "network", "storm", "restart" or
                                 # "recover" (not at all: held until the SFU has spare CPU again)
    reason: str | None = None    # said before the step, where it is not one more room
    # A storm: those above `fresh_from` leave first; the newcomers then all join at once, inside a
    # window measuring those already in, and have `within` s for their videos to play.
    fresh_from: int = 0
    within: float = 10.0
    # A restart ("restart"): the SFU is restarted, or with `cut_s` the link is cut that long (under
    # `network`), and participants whose session ended rejoin (or, not `rejoin`, stay out); `within`
    # is then how long their videos have to come back (and for a recovery, how long it may hold).
    rejoin: bool = True
    cut_s: float = 0.0


class LoadShape:
    name = ""
    options: dict = {}           # its own settings: name -> settings.opt(...)
    done: str | None = None      # why the last tick() ended the run

    @classmethod
    def from_config(cls, cfg, knee: Callable[[], object]) -> "LoadShape":
        raise NotImplementedError

    @classmethod
    def rooms_cap(cls, cfg) -> int:
        """The most rooms the shape may add."""
        return cfg.rooms

    @classmethod
    def adopt(cls, values: dict, given: set[str]) -> dict:
        """The settings `values` with those the user `given` that the shape does not use as such taken
        in its terms, as config.load() builds them (so that a copy of the settings keeps them)."""
        return values

    @classmethod
    def networks(cls, cfg) -> tuple[str, ...]:
        """The network profiles its steps may ask for, checked before the run starts."""
        return ()

    def tick(self, status: Status) -> Step | None:
        raise NotImplementedError


SHAPES: dict[str, type[LoadShape]] = plugins.discover(__name__, __path__, LoadShape)


def options() -> dict:
    """Every shape's own settings, by name."""
    return plugins.options(SHAPES.values())


def from_config(cfg, knee: Callable[[], object], halts: list[Callable[[], str | None]] = ()) -> LoadShape:
    """The shape `cfg.shape` names; `knee()` reads the knee so far, for shapes that stop on it;
    `halts` may end any shape early (the outputs' halt())."""
    shape = SHAPES[cfg.shape].from_config(cfg, knee)
    return Halting(shape, list(halts)) if halts else shape


class Halting(LoadShape):
    """Another shape, ended before its next step as soon as one of `halts` gives a reason."""

    def __init__(self, shape: LoadShape, halts: list[Callable[[], str | None]]):
        self.shape, self.halts = shape, halts

    def tick(self, status: Status) -> Step | None:
        if status.participants:   # nothing is measured before the first step
            for halt in self.halts:
                if (why := halt()) is not None:
                    self.done = why
                    return None
        step = self.shape.tick(status)
        self.done = self.shape.done
        return step
