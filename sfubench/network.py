"""Network profiles for the lab's link, and the link emulator that applies them (netem/, Go).

This kernel has no netem, so a profile runs in user space: the lab puts a namespace of its own
between the clients and the SFU, and sfubench-netem bridges its two veth ends frame by frame,
applying each direction's profile. The same definitions render as `tc netem` commands for
machines whose kernel has netem (cloud client nodes)."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import shapes
from .config import ROOT, ConfigError
from .gobuild import build

PROFILES = Path(__file__).with_name("networks.toml")
# One direction's keys and rules, which the link emulator (Go) reads too.
SCHEMA = json.loads((ROOT / "netem" / "profile.schema.json").read_text())
KEYS = tuple(SCHEMA["properties"])


def _allows(rule: dict, value) -> bool:
    """Whether `value` satisfies one property's rule (the subset of JSON Schema the file uses): a
    finite number only (TOML writes nan and inf, and NaN passes every comparison)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False
    if "const" in rule and value != rule["const"]:
        return False
    if "minimum" in rule and value < rule["minimum"]:
        return False
    if "maximum" in rule and value > rule["maximum"]:
        return False
    return not rule.get("anyOf") or any(_allows(r, value) for r in rule["anyOf"])


@dataclass(frozen=True)
class Direction:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    burst: float = 0.0
    rate_kbps: float = 0.0
    queue_ms: float = 0.0

    def __post_init__(self):
        for k, rule in SCHEMA["properties"].items():
            if not _allows(rule, getattr(self, k)):
                raise ConfigError(f"network profile: {k} {rule['errorMessage']}, got {getattr(self, k)!r}")

    def netem(self, dev: str) -> list[str]:
        """The same direction as a `tc` command on a kernel with netem (egress of `dev`)."""
        cmd = ["tc", "qdisc", "replace", "dev", dev, "root", "netem"]
        if self.delay_ms or self.jitter_ms:
            cmd += ["delay", f"{self.delay_ms:g}ms"] + ([f"{self.jitter_ms:g}ms", "distribution", "normal"]
                                                        if self.jitter_ms else [])
        if self.loss_pct:
            if self.burst > 1 and self.loss_pct < 100:   # the same two-state model: p enters the bad state, r leaves it
                r = 100 / self.burst
                p = self.loss_pct * r / (100 - self.loss_pct)
                cmd += ["loss", "gemodel", f"{p:.4g}%", f"{r:.4g}%", "100%", "0%"]
            else:
                cmd += ["loss", f"{self.loss_pct:g}%"]
        if self.rate_kbps:
            cmd += ["rate", f"{self.rate_kbps:g}kbit"]
            if self.queue_ms:
                cmd += ["limit", str(max(1, round(self.rate_kbps * self.queue_ms / 8 / 1200)))]
        return cmd


@dataclass(frozen=True)
class Network:
    name: str
    up: Direction      # the clients' side to the SFU
    down: Direction    # the SFU to the clients

    def describe(self) -> dict:
        return {"name": self.name, "up": dataclasses.asdict(self.up), "down": dataclasses.asdict(self.down)}

    @property
    def rtt_ms(self) -> float:
        return self.up.delay_ms + self.down.delay_ms


PLAIN = Network("plain", Direction(), Direction())   # the lab's link as it is


def _directions(name: str, table: dict) -> Network:
    unknown = set(table) - set(KEYS) - {"up", "down"}
    if unknown:
        raise ConfigError(f"network profile {name!r}: unknown keys {', '.join(sorted(unknown))} "
                          f"(known: {', '.join(KEYS)}, up, down)")
    both = {k: v for k, v in table.items() if k in KEYS}
    out = {}
    for d in ("up", "down"):
        own = table.get(d, {})
        if not isinstance(own, dict) or set(own) - set(KEYS):
            raise ConfigError(f"network profile {name!r}: [{d}] takes only {', '.join(KEYS)}")
        out[d] = Direction(**{**both, **own})
    return Network(name, out["up"], out["down"])


@dataclass(frozen=True)
class LinkPlan:
    """What a run puts on the lab's link: its own network (None: the plain veth, no emulator), the
    synthetic participants' own, and the degrade shape's steps by name."""
    own: Network | None = None
    synthetic: Network | None = None
    steps: dict = dataclasses.field(default_factory=dict)

    def describe(self) -> dict | None:
        if self.own is None:
            return None
        return {**self.own.describe(), "synthetic": None if self.synthetic is None else self.synthetic.describe(),
                "steps": [n.describe() for n in self.steps.values()]}

    def step(self, name: str | None) -> Network:
        """The degrade shape's profile `name`, or the run's own (None)."""
        return self.own if name is None else self.steps[name]


def plan(cfg, synthetic: bool) -> LinkPlan:
    """The link plan of a run's settings (`synthetic`: whether it has synthetic participants)."""
    own = resolve(cfg.network)
    group = resolve(cfg.synthetic_network) if cfg.synthetic_network else None
    if group is not None and not synthetic:
        raise ConfigError("--synthetic-network needs synthetic participants (see --real-per-room, --real-rooms)")
    steps = {name: resolve(name) for name in shapes.SHAPES[cfg.shape].networks(cfg)}
    if None in steps.values():
        raise ConfigError(f"--shape {cfg.shape}: a step's network cannot be none")
    if (group is not None or steps) and own is None:
        own = PLAIN
    return LinkPlan(own, group, steps)


def names() -> list[str]:
    return list(tomllib.loads(PROFILES.read_text()))


def resolve(spec: str) -> Network | None:
    """`spec`: "" or "none" (no emulator), a profile name of networks.toml, or a TOML file holding
    one profile (the same keys)."""
    if spec in ("", "none"):
        return None
    profiles = tomllib.loads(PROFILES.read_text())
    if spec in profiles:
        return _directions(spec, profiles[spec])
    path = Path(spec)
    if path.suffix == ".toml" and path.is_file():
        try:
            return _directions(path.stem, tomllib.loads(path.read_text()))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"--network {spec}: {e}") from None
    raise ConfigError(f"--network: no profile {spec!r}; built in: {', '.join(profiles)}, or a .toml file")


def binary(cache: Path) -> Path:
    """sfubench-netem for the current sources, built once into the cache."""
    return build("sfubench-netem", ROOT / "netem", (ROOT / "netem",), cache)


class Emulator:
    """The sfubench-netem process of a run, bridging `a` (the clients' side) and `b` (the SFU's) in
    the namespace `netns`; its counters land in `stats` once a second."""

    def __init__(self, binary: Path, link: tuple, network: Network, folder: Path,
                 group: tuple[str, Network] | None = None, *, wrap=lambda argv: argv):
        """`link`: the lab's two ends in the emulator's namespace (lab.py's Hosts: the clients' side,
        then the SFU's); its counters and log go to `folder` (netem.json, netem.log); `group`: (a
        client address, the network its frames take instead); `wrap`: argv -> argv that first
        joins the emulator's cgroup."""
        stats, log = folder / "netem.json", folder / "netem.log"
        argv = ["ip", "netns", "exec", link[0].netns, str(binary), "-a", link[0].interface, "-b",
                link[1].interface,
                "-up", json.dumps(dataclasses.asdict(network.up)),
                "-down", json.dumps(dataclasses.asdict(network.down)), "-stats", str(stats)]
        if group is not None:
            address, net = group
            argv += ["-group-ip", address, "-group-up", json.dumps(dataclasses.asdict(net.up)),
                     "-group-down", json.dumps(dataclasses.asdict(net.down))]
        self.argv = wrap(argv)
        self.stats, self.log = stats, log
        self.proc = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)

    def change(self, network: Network) -> None:
        """Puts the link (not the group's) under `network` from now on."""
        line = json.dumps({"up": dataclasses.asdict(network.up), "down": dataclasses.asdict(network.down)})
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, AttributeError) as e:
            raise RuntimeError(f"the link emulator cannot change its network: {self.failure() or e}") from None

    def failure(self) -> str | None:
        if self.proc is None or self.proc.poll() is None:
            return None
        tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
        return f"the link emulator exited with status {self.proc.returncode}" + (f": {tail[0]}" if tail else "")

    def counters(self) -> dict | None:
        try:
            return json.loads(self.stats.read_text())
        except (OSError, ValueError):
            return None

    def link_counters(self) -> dict:
        """The link's packets and losses, both directions summed (the group's apart): cumulative
        fields of the SFU's server.jsonl rows, so a window's link loss is their Δ."""
        c = self.counters() or {}
        return {f"link_{k}": sum(c.get(d, {}).get(k, 0) for d in ("up", "down")) for k in ("packets", "lost")}

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
