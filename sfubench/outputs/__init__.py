"""Where a run's results go, k6-style: one class per file of this folder, found by its `name`,
chosen with --output (comma-separated, in the order they finish). Each has a lifecycle: start(bus)
when the run folder exists, to take records as they come; halt() before each step of load, to stop
the ramp early (thresholds' --abort-on-fail); stop() once the folder is closed and its
frames scored, returning what meta.json should add. An output's own settings (`options`) join the
schema (config.py), as load shapes' do.

A new output is a new file here: an Output subclass with a `name`, its `options`, `start` and
`stop`; nothing else changes."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .. import plugins
from ..settings import ConfigError


class Output:
    name = ""
    options: dict = {}   # its own settings: name -> settings.opt(...)
    first = False        # stops before the others: what it adds to meta.json, they show

    def __init__(self, cfg, run_path: Path, say: Callable[[str], None]):
        self.cfg, self.run_path, self.say = cfg, run_path, say

    @classmethod
    def wanted(cls, cfg) -> bool:
        """Whether the run writes to it (named by --output; an output may also follow from its own
        settings, as a Pushgateway URL does)."""
        return cls.name in names(cfg)

    @classmethod
    def check(cls, cfg) -> None:
        """Raise ConfigError when the settings it needs are missing (it is wanted)."""

    @property
    def label(self) -> str:
        """How a failure of it is announced."""
        return self.name

    def start(self, bus) -> None:
        """The run has begun: subscribe to the records it takes live."""

    def halt(self) -> str | None:
        """Asked before each step of load: a reason to add no more (the run then measures its target
        at the load it has), or None."""
        return None

    def stop(self) -> dict:
        """The run folder is complete: write what it writes; return what meta.json adds."""
        return {}


OUTPUTS: dict[str, type[Output]] = plugins.discover(__name__, __path__, Output)


def options() -> dict:
    """Every output's own settings, by name."""
    return plugins.options(OUTPUTS.values())


def names(cfg) -> list[str]:
    return [n.strip() for n in cfg.output.split(",") if n.strip()]


def check(cfg) -> None:
    unknown = [n for n in names(cfg) if n not in OUTPUTS]
    if unknown:
        raise ConfigError(f"--output: no output named {', '.join(unknown)} (there are {', '.join(OUTPUTS)})")
    for o in OUTPUTS.values():
        if o.wanted(cfg):
            o.check(cfg)


def for_run(cfg, run_path: Path, say: Callable[[str], None]) -> list[Output]:
    """The run's outputs, in the order --output names them (then those their settings ask for),
    those that go first before the rest."""
    order = [n for n in names(cfg) if n in OUTPUTS] + [n for n in OUTPUTS if n not in names(cfg)]
    order.sort(key=lambda n: not OUTPUTS[n].first)
    return [OUTPUTS[n](cfg, run_path, say) for n in order if OUTPUTS[n].wanted(cfg)]
