"""Where a run's SFU and clients are: this machine's lab (`LocalSite`) or hosts elsewhere
(`RemoteSite`: a cloud's, or any SFU host and grid given by address). The engine (loadtest.py) asks
a site the same questions either way and never which kind it has; the site is chosen once, from the
settings (`for_config`) or by a provisioner that stood the hosts up (cloud/run.py).
"""
from __future__ import annotations

import contextlib
import os
import secrets
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import cgroups
from . import grid as grid_mod
from . import network
from . import synthetic
from . import traffic
from .agent import PROBE_PORT, TOKEN_ENV, TOKEN_HEADER, read_bounded
from .cgroups import CpuGroup
from .config import BROWSER_CORES, BROWSER_SHARE, LAB_SFU_CORES, SYNTHETIC_CODECS, Config, ConfigError, cpu_list
from .settings import AUTO
from .shapes.until_knee import LAB_RAMP_MINUTES
from .gobuild import GoBuildError
from .lab import Host, LocalLab, Resident
from .probes import GroupProbe, RemoteProbe, TreeProbe

# How long a remote SFU may take to answer its health check: a cloud host may still be installing.
SFU_ATTACH_TIMEOUT_S = 900


class Site:
    """One place a run happens. `up()` before the SFU starts, `down()` after whatever happened;
    between them the engine starts the SFU, the grid and the generator through the site. `token`:
    the run's secret, which every request to its pages, generators and agents carries: the one
    given (a provisioner's, which its hosts were given too), else $SFUBENCH_RUN_TOKEN (hosts the
    user started), else a new one."""
    kind = ""
    sfu_address: str | None = None

    def __init__(self, grid_url: str, page_address: str, token: str = ""):
        self.grid_url = grid_url
        self.page_host = page_address or "127.0.0.1"
        self.token = token or os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24)

    @classmethod
    def defaults(cls, values: dict) -> dict:
        """`values` (every setting) with each "auto" that depends on where the run goes replaced by
        what it stands for on this kind of site."""
        raise NotImplementedError

    @classmethod
    def refuse(cls, cfg: Config) -> None:
        """ConfigError for the settings this kind of site cannot honour."""

    def check(self, adapter) -> None:
        """Refuses an SFU this site cannot run (ConfigError)."""

    def install(self, adapter, cache: Path, progress) -> str | None:
        """Installs what this machine serves or runs of the SFU; returns the installed version."""
        raise NotImplementedError

    def prepare(self, cfg: Config, cache: Path, net_plan, synthetic_wanted: bool, progress) -> Path | None:
        """Builds what this machine runs for the clients (grid, emulator); returns the synthetic
        generator's binary when it runs here."""
        raise NotImplementedError

    @property
    def groups(self) -> dict[str, CpuGroup]:
        return {}

    def describe(self) -> dict:
        return {"kind": self.kind, "grid_url": self.grid_url or None}

    def up(self, run_path: Path, progress) -> None:
        if self.grid_url:
            self.grid_check(self.grid_url)

    def grid_check(self, url: str) -> None:
        """What the grid must be before the run: ready (a grid with nodes)."""
        grid_mod.check_reachable(url)

    def clients(self):
        """The context the engine runs the clients' side in (the pages, the grid, the probes)."""
        return contextlib.nullcontext()

    def start_sfu(self, adapter, run_path: Path, cache: Path, progress):
        raise NotImplementedError

    def grid(self, sessions: int, run_path: Path, cache: Path, progress):
        """(a grid this run started or None, the grid's URL)."""
        return None, self.grid_url

    def generator(self, synth: dict, collect_url: str, failed, run_path: Path):
        raise NotImplementedError

    def browser_media(self, media, page_url: str, cache: Path) -> tuple[Path, Path, dict]:
        """(video, audio, chrome_options keywords) for a browser of this site's grid."""
        return media.y4m, media.wav, {}

    def probes(self, server, grid, generator, progress) -> list:
        return []

    def listeners(self) -> list:
        """(handler, streams) pairs the run's events go to (a cloud grid scales with the rooms)."""
        return []

    def set_network(self):
        """A callable changing the emulated link to a named profile, or None without an emulator."""
        return None

    def down(self) -> dict:
        """Tears down what up() made; returns facts for meta["network"]."""
        return {}

    def leftovers(self) -> list[str]:
        """What a run stopped mid-teardown leaves here, and how to remove it."""
        return []


class LocalSite(Site):
    """This machine: the SFU and the clients in two network namespaces joined by a veth link
    (lab.py), each role in a cgroup of its own, the link optionally emulated (network.py)."""
    kind = "local"

    @classmethod
    def defaults(cls, values: dict) -> dict:
        """This machine's lab: on two cores or more the SFU on CPU 0 and the clients on the rest, so
        neither takes the other's; a budget of LAB_SFU_CORES (a ramp to the knee with synthetic
        participants has its own sized: calibrate.py); browsers measuring the first room, as many as
        the clients' cores carry with headroom; a ramp bounded to keep a default run under 10 min."""
        cpus = os.cpu_count() or 1
        split = cpus >= 2
        chosen = {"sfu_cpus": LAB_SFU_CORES, "sfu_cpuset": "0" if split else "",
                  "client_cpuset": (f"1-{cpus - 1}" if cpus > 2 else "1") if split else "",
                  "real_rooms": 1, "ramp_minutes": LAB_RAMP_MINUTES}
        out = {**values, **{name: v for name, v in chosen.items() if values.get(name) == AUTO}}
        if out.get("real_per_room") == AUTO:
            try:
                reach = len(cpu_list(out.get("client_cpuset") or "")) or cpus
            except ValueError:
                reach = cpus   # a malformed list: its own check says so
            quota = out.get("client_cpus")
            # a quota above the CPUs the clients may use buys nothing (nor does one out of bounds)
            cores = min(quota, reach) if isinstance(quota, (int, float)) and quota > 0 else reach
            room = out.get("users_per_room") if isinstance(out.get("users_per_room"), int) else 64
            out["real_per_room"] = max(1, min(room, int(cores * BROWSER_SHARE / BROWSER_CORES)))
        return out

    @classmethod
    def refuse(cls, cfg: Config) -> None:
        if cfg.client_probes:
            raise ConfigError("--client-probes reads a remote grid's nodes (with --sfu-address); the "
                              "local lab probes its clients itself")
        if cfg.synthetic_generators:
            raise ConfigError("--synthetic-generators drives generators of a remote run (with --sfu-address); "
                              "the local lab starts its own")

    def __init__(self, cfg: Config):
        super().__init__(cfg.grid_url, cfg.page_address)
        self.cfg = cfg
        self.lab: LocalLab | None = None
        self.held = False   # the lab is this run's: only then does down() remove anything
        self._groups = _groups(cfg)
        self.emulator = self.net_plan = self.emulator_binary = self.resident = None

    def check(self, adapter) -> None:
        if "local" not in adapter.where:
            why = adapter.data.get("why_cloud", "it cannot be installed on this machine")
            raise ConfigError(f"{adapter.name} runs in the cloud only ({why}): see terraform/ and "
                              f"`make cloud-loadtest`")

    def install(self, adapter, cache: Path, progress) -> str | None:
        progress.say(f"sfu: installing {adapter.name} {adapter.version} (skipped when installed)")
        adapter.install(cache)
        return adapter.installed_version(cache)

    def prepare(self, cfg: Config, cache: Path, net_plan, synthetic_wanted: bool, progress) -> Path | None:
        binary = None
        if synthetic_wanted:
            progress.say("synthetic participants: building synth/ and encoding the clip (once, then cached)")
            binary = synthetic.build(cache)
        if cfg.browser_participants and not cfg.grid_url:
            grid_mod.install(grid_mod.grid_cache_dir(cache))
        self.net_plan = net_plan
        if net_plan.own is not None:
            progress.say(f"network: {net_plan.own.name}"
                         + (f", synthetic participants {net_plan.synthetic.name}" if net_plan.synthetic else "")
                         + ", applied by the link emulator (netem/; built once, then cached)")
            try:
                self.emulator_binary = network.binary(cache)
            except GoBuildError as e:
                raise ConfigError(str(e)) from None
            if self._groups:
                # the network, neither the SFU nor a client: probed as a role of its own, under no
                # quota and on any CPU (pinned to the clients' it left them short of what they
                # carried beside it, and their quota is for slower clients, not for the network)
                self._groups["link"] = CpuGroup(f"{self.cfg.lab_prefix}-link")
        self.lab = LocalLab(self.cfg.lab_prefix, self.cfg.lab_subnet, emulated=net_plan.own is not None)
        return binary

    @property
    def groups(self) -> dict[str, CpuGroup]:
        return self._groups

    def up(self, run_path: Path, progress) -> None:
        self.lab.up(run_path)
        self.held = True
        for g in self._groups.values():
            g.create()
        plan = self.net_plan
        if plan.own is not None:
            self.emulator = network.Emulator(
                self.emulator_binary, self.lab.link, plan.own, run_path,
                None if plan.synthetic is None else (self.lab.group_address, plan.synthetic), **self._wrap("link"))
            self.emulator.start()
        with self.clients():
            super().up(run_path, progress)

    def clients(self):
        return self.lab.inside_clients()

    def start_sfu(self, adapter, run_path: Path, cache: Path, progress):
        progress.say(f"sfu: starting {adapter.name} at {self.lab.sfu.address} ({self.lab.sfu.netns})")
        server = adapter.start(self.lab.sfu, run_path, cache, self.page_host, **self._wrap("sfu"))
        if self.emulator is not None:   # its health is watched from its own side of the emulated link
            self.resident = server.watch_from = Resident(self.lab.sfu.netns)
        return server

    def grid(self, sessions: int, run_path: Path, cache: Path, progress):
        if self.grid_url or not sessions:
            return None, self.grid_url
        grid = grid_mod.LocalGrid(grid_mod.grid_cache_dir(cache), run_path / "grid", grid_mod.free_port(),
                                  max_sessions=sessions, **self._wrap("clients"))
        progress.say(f"grid: starting Selenium Grid standalone for {sessions} browser session(s)")
        grid.start()
        return grid, grid.url

    def generator(self, synth: dict, collect_url: str, failed, run_path: Path):
        address = self.lab.group_address if synth["own_address"] else self.lab.clients.address
        return synthetic.Generator(synth, collect_url, address, run_path / "synth.log", self.token,
                                   **self._wrap("clients"))

    def probes(self, server, grid, generator, progress) -> list:
        lab, groups = self.lab, self._groups

        def sfu_pid():
            return next(iter(server.pids()), None)

        def counters():
            return {**(traffic.read(lab.sfu.netns) if lab.counted else {}),
                    **(self.emulator.link_counters() if self.emulator is not None else {})}
        out = [GroupProbe("sfu", groups["sfu"], sfu_pid, lab.sfu.interface, counters) if "sfu" in groups
               else TreeProbe("sfu", server.pids, sfu_pid, lab.sfu.interface, counters)]
        # the engine runs in the clients' namespace: its own counters are theirs
        if "clients" in groups:
            out.append(GroupProbe("clients", groups["clients"], os.getpid, lab.clients.interface))
        elif grid is not None or generator is not None:
            out.append(TreeProbe("clients", lambda: (grid.pids() if grid else [])
                                 + (generator.pids() if generator else []), os.getpid, lab.clients.interface))
        if "link" in groups:
            out.append(GroupProbe("link", groups["link"]))
        return out

    def set_network(self):
        if self.emulator is None:
            return None

        def change(name):
            """The link under profile `name` of the degrade shape's, or the run's own (None)."""
            self.emulator.change(self.net_plan.step(name))
            return self.net_plan.step(name).name
        return change

    def down(self) -> dict:
        facts = {}
        if not self.held:
            return facts   # the lab was refused (another run holds it): its namespaces and groups are that run's
        if self.resident is not None:
            self.resident.close()
        if self.emulator is not None:
            failure = self.emulator.failure()   # before it is stopped: whether it died during the run
            self.emulator.stop()
            facts = {"counters": self.emulator.counters(), "failure": failure}
        if self.lab is not None:
            self.lab.down()
        for g in self._groups.values():
            g.remove()
        return facts

    def leftovers(self) -> list[str]:
        if not self.held:
            return []
        out = []
        left = self.lab.remaining() if self.lab is not None else []
        if left:
            out.append(f"network namespaces {', '.join(left)} ({'; '.join(f'ip netns del {n}' for n in left)})")
        for role, g in self._groups.items():
            pids = g.pids()
            if pids:
                out.append(f"{role} processes {' '.join(map(str, pids))} in cgroup {g.describe()['cgroup']} "
                           f"(kill {' '.join(map(str, pids))})")
        return out

    def _wrap(self, role: str) -> dict:
        return {"wrap": self._groups[role].wrap} if role in self._groups else {}


@dataclass(frozen=True)
class Provisioned:
    """What a remote site has beyond its SFU's and its grid's addresses, from the settings or a
    provisioner (cloud/run.py): the probe its grid's nodes answer (`client_probes`), where
    generators already running take commands (`generators_url`) and their addresses
    (`generators()`), the provisioner's own probes and listeners (its nodes' CPU, its grid scaling
    with the rooms), what the grid must be before the run (`grid_check`: a provisioner's, which
    scales its nodes as rooms start, needs its hub to answer only), what the provisioner leaves if
    the run is stopped mid-teardown (`leftovers()`), and the run's `token`, which the hosts were
    given."""
    client_probes: str = ""
    generators_url: str = ""
    generators: Callable | None = None
    probes: tuple = ()
    listeners: tuple = ()
    grid_check: Callable | None = None
    leftovers: Callable | None = None
    token: str = ""


class RemoteSite(Site):
    """An SFU host running `sfubench serve` and a Selenium Grid elsewhere: nothing of the run's is
    on this machine but the engine, which serves the pages on `page_address` (one the grid's nodes
    reach); the nodes read the media from `node_cache`."""
    kind = "remote"

    def __init__(self, sfu_address: str, grid_url: str, page_address: str, node_cache: str,
                 provisioned: Provisioned = Provisioned()):
        super().__init__(grid_url, page_address, provisioned.token)
        self.run_path: Path | None = None
        if provisioned.grid_check is not None:
            self.grid_check = provisioned.grid_check
        if provisioned.leftovers is not None:
            self.leftovers = provisioned.leftovers
        self.sfu_address, self.node_cache, self.client_probes = sfu_address, node_cache, provisioned.client_probes
        self.generators_url, self.generator_addresses = provisioned.generators_url, provisioned.generators
        self.extra_probes, self.extra_listeners = list(provisioned.probes), list(provisioned.listeners)

    @classmethod
    def defaults(cls, values: dict) -> dict:
        """Hosts elsewhere: their machines are the budget, every participant a browser, the ramp
        as long as the hosts carry."""
        chosen = {"sfu_cpus": 0.0, "sfu_cpuset": "", "client_cpuset": "", "real_rooms": 1000,
                  "real_per_room": 64, "ramp_minutes": 0.0}
        return {**values, **{name: v for name, v in chosen.items() if values.get(name) == AUTO}}

    @classmethod
    def refuse(cls, cfg: Config) -> None:
        """What only the local lab can honour; and an SFU given by its address needs a grid, and
        generators for synthetic participants (a cloud run's provisioner gives both)."""
        if cfg.sfu_cpus or cfg.client_cpus or cfg.sfu_cpuset or cfg.client_cpuset:
            raise ConfigError("CPU quotas and pinning confine the local lab's processes; a remote run's "
                              "hosts are sized by Terraform and the grid's manifests")
        if cfg.network != "none" or cfg.synthetic_network:
            raise ConfigError("--network emulates the local lab's link; a remote run's network is "
                              "the cloud's own")
        if cfg.shape == "restart":
            raise ConfigError("--shape restart: a remote run's SFU is started by its host (sfubench serve); "
                              "only the local lab restarts the SFU it started")
        if cfg.sfu_address and not cfg.grid_url:
            raise ConfigError("--sfu-address needs --grid-url: with a remote SFU the browsers run on a "
                              "remote grid too")
        if cfg.sfu_address and cfg.browser_participants < cfg.participants and not cfg.synthetic_generators:
            raise ConfigError("synthetic participants in a remote run need generators on the grid's hosts: "
                              "give --synthetic-generators (the cloud provisioner starts them), or leave "
                              "--real-per-room and --real-rooms at their defaults")
        if cfg.browser_participants < cfg.participants and cfg.codec != SYNTHETIC_CODECS[0]:
            raise ConfigError(f"--codec {cfg.codec}: a remote run's generators publish "
                              f"{SYNTHETIC_CODECS[0].upper()} (`sfubench generate` encodes the clip in it alone); "
                              "run rooms of browsers (--preset browsers)")

    @classmethod
    def from_config(cls, cfg: Config) -> "RemoteSite":
        return cls(cfg.sfu_address, cfg.grid_url, cfg.page_address, cfg.node_cache or cfg.cache,
                   Provisioned(cfg.client_probes, cfg.synthetic_generators))

    def describe(self) -> dict:
        return {**super().describe(), "sfu_address": self.sfu_address, "node_cache": self.node_cache,
                "generators": self.generators_url or None}

    def install(self, adapter, cache: Path, progress) -> str | None:
        # the SFU runs on its own host; its client library (the adapter's assets) is still served
        # from here, with the pages
        if adapter.data.get("assets"):
            progress.say(f"sfu: installing {adapter.name} {adapter.version} (skipped when installed): "
                         "its client library is served from here")
            adapter.install(cache)
        return None

    def prepare(self, cfg: Config, cache: Path, net_plan, synthetic_wanted: bool, progress) -> Path | None:
        if synthetic_wanted:   # the generators run elsewhere, on the same clip encoded there
            progress.say("synthetic participants: encoding the clip (once, then cached)")
        return None

    def start_sfu(self, adapter, run_path: Path, cache: Path, progress):
        progress.say(f"sfu: waiting for {adapter.name} at {self.sfu_address} to answer its health check")
        server = adapter.attach(Host("", "", self.sfu_address), run_path, SFU_ATTACH_TIMEOUT_S, self.page_host)
        self.run_path = run_path
        self._fetch("facts", run_path / "sfu-host.json", progress.say)   # what the SFU ran on
        return server

    def down(self) -> dict:
        if self.run_path is not None:   # the SFU's own log, from its host
            self._fetch("log", self.run_path / "sfu-host.log", lambda line: None)
        return {}

    def _fetch(self, what: str, into: Path, say) -> None:
        """The SFU host's GET /<what> (its `sfubench serve`) into the run folder; a host that cannot
        answer is said, never fatal."""
        request = urllib.request.Request(f"http://{self.sfu_address}:{PROBE_PORT}/{what}",
                                         headers={TOKEN_HEADER: self.token})
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as r:
                into.write_bytes(read_bounded(r))
        except OSError as e:
            say(f"sfu: its host's {what} could not be read ({e})")

    def generator(self, synth: dict, collect_url: str, failed, run_path: Path):
        return synthetic.RemoteGenerators(self.generators_url, collect_url, failed, self.token,
                                          addresses=self.generator_addresses)

    def browser_media(self, media, page_url: str, cache: Path) -> tuple[Path, Path, dict]:
        # the nodes' own Chromium and their copy of the media; pages on a private address are not
        # a secure context, and getUserMedia needs one
        on_node = Path(self.node_cache).expanduser()
        video, audio = (on_node / p.relative_to(cache) for p in (media.y4m, media.wav))
        return video, audio, {"binary": None, "extra": [f"--unsafely-treat-insecure-origin-as-secure={page_url}"]}

    def probes(self, server, grid, generator, progress) -> list:
        # the SFU host's `sfubench serve` probes its SFU; the grid's nodes, their agents
        out = []
        for role, url in (("sfu", f"http://{self.sfu_address}:{PROBE_PORT}/probe"), ("clients", self.client_probes)):
            if not url:
                continue
            try:
                out.append(RemoteProbe(role, url, token=self.token))
            except (OSError, ValueError, KeyError) as e:
                whose = {"sfu": "the SFU's", "clients": "the clients'"}[role]
                progress.say(f"probe: none answers at {url} ({e}): {whose} CPU will not be recorded")
        return out + self.extra_probes

    def listeners(self) -> list:
        return self.extra_listeners


def kind_for(values: dict) -> type[Site]:
    """The kind of site the settings name: an SFU address makes the run remote."""
    return RemoteSite if values.get("sfu_address") else LocalSite


def for_config(cfg: Config) -> Site:
    """The site the settings name."""
    return RemoteSite.from_config(cfg) if kind_for(cfg.as_dict()) is RemoteSite else LocalSite(cfg)


def _groups(cfg: Config) -> dict[str, CpuGroup]:
    """A cgroup per local role, so its CPU is exact and can be capped; none where the host has no
    cgroup cpu controller (then the probes walk process trees and quotas are refused)."""
    if cgroups.version() is None:
        if cfg.sfu_cpus or cfg.client_cpus or cfg.sfu_cpuset or cfg.client_cpuset:
            raise cgroups.CgroupError("CPU quotas and pinning need a cgroup cpu controller, and this "
                                      "host has none")
        return {}
    period = round(cfg.cpu_period_ms * 1000)
    out = {"sfu": CpuGroup(f"{cfg.lab_prefix}-sfu", cfg.sfu_cpus, cfg.sfu_cpuset, period)}
    if not cfg.grid_url:
        # real-time for the synthetic generator's pacers: a participant's sends do not wait for
        # whatever else the clients' CPU runs (the engine's own work held them up to 5 ms); a
        # capped group is lent none (CpuGroup)
        out["clients"] = CpuGroup(f"{cfg.lab_prefix}-clients", cfg.client_cpus, cfg.client_cpuset, period,
                                  realtime=cgroups.REALTIME_SHARE)
    return out
