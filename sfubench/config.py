"""One schema for every setting: it drives the CLI flags, the SFUBENCH_* environment, the TOML
config file and docs/config.md, so none of them can drift from the others.

Precedence, lowest first: defaults, config file, environment, command line.

(Over 400 lines: most of it is the schema itself, one declaration with its help text per setting.)
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
import re
import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import outputs, shapes
from .settings import AUTO, SEPARATOR, ConfigError, opt, public

ROOT = Path(__file__).resolve().parent.parent
ENV_PREFIX = "SFUBENCH_"


def cache_root() -> Path:
    """The build cache (media, grid jars, SFU builds) that every clone on the machine shares:
    $SFUBENCH_CACHE, else the `cache` setting's default. The one place that says so."""
    return Path(os.path.expanduser(os.environ.get(ENV_PREFIX + "CACHE") or FIELDS["cache"].default))


# The video codecs a run may ask browsers to publish, as adapters name them in sfu.toml's `codecs`:
# the first is the default, the 2018 study's.
CODECS = ("vp8", "h264", "vp9", "av1")
# The ones synthetic participants send and read (sfubench/encoding.py encodes the clip in each,
# synth/codec.go packetizes and reassembles them); an adapter's driver names those it negotiates.
SYNTHETIC_CODECS = ("vp8", "h264", "vp9", "av1")
SVC_CODECS = ("vp9", "av1")   # those Chrome encodes as SVC spatial layers (--svc)
SVC_LAYERS = 3                # --svc's spatial layers where --simulcast does not say: L3T3_KEY


def available_sfus() -> list[str]:
    root = ROOT / "sfu-configs"
    return sorted(p.name for p in root.iterdir() if (p / "sfu.toml").is_file())


# What the "auto" settings stand for in the local lab (sites.LocalSite.defaults). The budget of a
# ramp to the knee with synthetic participants is sized to the machine (calibrate.py); any other
# local run's is LAB_SFU_CORES. A browser participant in a room of 7 at 320x180@15 costs 0.35-0.45
# core with Chrome's own processes, and browsers get half the clients' cores, the generator and the
# grid the rest.
LAB_SFU_CORES = 0.5
BROWSER_CORES = 0.4
BROWSER_SHARE = 0.5


def derived(values: dict) -> dict:
    """`values` with the "auto" of settings that follow from other settings, wherever the run goes:
    the camera's profile (960 px wide where three simulcast layers need it)."""
    out = dict(values)
    if out.get("media") == AUTO:
        layered = isinstance(out.get("simulcast"), int) and out["simulcast"] > 1
        out["media"] = "hd" if layered else "local"
    return out


def tile_layer(videos: int) -> str:
    """The smallest layer (largest, half or smallest: the full picture, a half, a quarter of its
    height) that covers a tile in the most square grid of `videos` tiles in a 16:9 window, the full
    picture filling the window (a one-to-one call). 16:9 tiles in c columns are 1/c of the window's
    height."""
    tile = 1 / math.ceil(math.sqrt(max(videos, 1)))
    return "smallest" if tile <= 1 / 4 else "half" if tile <= 1 / 2 else "largest"


@dataclass(frozen=True)
class Settings:
    """The settings every run has; Config adds each load shape's and output's own (sfubench/shapes/,
    sfubench/outputs/)."""
    sfu: str = opt("janus", "SFU adapter to test: a folder of sfu-configs/", scenario=False)
    preset: str = opt("study", "a named scenario the other settings start from: a TOML file of "
                      "sfubench/presets/ (study: these defaults, the 2018 study in miniature; browsers: "
                      "one room of 5 real Chromium participants; paper: the study's own scenario, for "
                      "the cloud) or a .toml file of yours; the settings given beside it win",
                      metavar="NAME|FILE", scenario=False)
    rooms: int = opt(1, "rooms to ramp up to, added one by one (the ramp and degrade shapes); given to the "
                     "until-knee shape, the most rooms it adds (as --max-rooms)", min=1, max=1000)
    users_per_room: int = opt(7, "participants per room, as in the 2018 study", min=2, max=1024)
    publishers_per_room: int = opt(0, "participants of each room that publish (its first users); the others "
                                   "only watch: they receive every publisher of their room and send no media. "
                                   "0: every one (a meeting)", min=0, max=1024)
    real_per_room: int = opt(AUTO, "browser participants in each room that has any (its first users); "
                             "the others are synthetic (Go participants publishing the same frame-coded "
                             "clip, synth/). auto: as many as the clients' cores carry with headroom in "
                             f"the local lab (half of them at {BROWSER_CORES:g} core a browser: 1 on one core), "
                             "every one on a remote grid", min=0, max=64, kind="int")
    real_rooms: int = opt(AUTO, "rooms that have browser participants, counted from the first; the "
                          "rooms after them are all synthetic. auto: 1 in the local lab, every room on "
                          "a remote grid", min=0, max=1000, kind="int")
    shape: str = opt("until-knee", "load shape: " + "; ".join(f"{name} ({s.__doc__})" for name, s in
                                                          shapes.SHAPES.items()) + " (sfubench/shapes/)",
                     choices=tuple(shapes.SHAPES))
    knee: str = opt("video", "the knee that ends a ramp to the knee: video (the 2018 study's criteria), "
                    "audio (received audio's E-model MOS below 3.6, or more than 5 % of it concealed: "
                    "reports/audio.py), or both (whichever comes first); a report shows both",
                    choices=("video", "audio", "both"))
    participants_per_browser: int = opt(
        7, "participants hosted by one browser tab, each in its own iframe; 1 is the study's "
        "one browser per participant", min=1, max=64, scenario=False)
    media: str = opt(AUTO, "fake camera profile: local (320x180@15, light), paper (540x360@30, the "
                     "study's) or hd (960x540@15: three simulcast layers need 960 px, below which Chrome "
                     "and livekit-client send fewer). auto: hd with --simulcast above 1, else local",
                     choices=("local", "paper", "hd"), kind="str")
    simulcast: int = opt(1, "video layers each browser participant publishes (simulcast: the full "
                         "picture, then half and a quarter of its size); 1: one stream, as in the 2018 "
                         "study. The adapter's page must publish them (`sfubench list-sfus` says which "
                         "do); synthetic participants send them too where the adapter's driver can (`list-sfus`), "
                         "else the full picture alone", min=1, max=3)
    codec: str = opt("vp8", "video codec each browser participant publishes: vp8 (the 2018 study's), h264 "
                     "(constrained baseline, packetization mode 1), vp9 or av1 (profile 0, one spatial "
                     "layer). The adapter must take it (`sfubench list-sfus` lists each one's codecs); "
                     "synthetic participants send it too where the adapter's driver can (`list-sfus`), "
                     "else another codec than VP8 needs rooms of browsers (--preset browsers)",
                     choices=CODECS)
    svc: bool = opt(False, "publish the --simulcast layers (three where it is not given) as the spatial "
                    "layers of one SVC stream (L<n>T3_KEY, as Chrome encodes VP9 and AV1 SVC) instead of "
                    "simulcast streams; needs "
                    "--codec vp9 or av1, and an adapter whose page does SVC in that codec (`sfubench "
                    "list-sfus`)")
    receive_layer: str = opt("largest", "the layer each participant asks its SFU for, with --simulcast: largest "
                             "(what each SFU forwards by default, the link permitting), half, smallest, tile "
                             "(the smallest layer that fills the participant's tile in a grid of the room's "
                             "other videos in a 16:9 window: with rooms of 7, half) or mix (the "
                             "even-numbered participants of each room ask for the smallest); synthetic "
                             "participants ask as browsers do",
                             choices=("largest", "half", "smallest", "tile", "mix"))
    on_client_failure: str = opt("continue", "what a failed participant or a browser given up does to "
                                 "the run: continue (it counts as failed streams) or abort",
                                 choices=("continue", "abort"), scenario=False)
    video_timeout: float = opt(60.0, "seconds a video has to be verified playing before its check "
                               "times out", min=1, max=3600)
    join_interval: float = opt(0.0, "seconds between one participant's join and the next's in a "
                               "room; 0: a room joins at once, a burst that an SFU on a small budget "
                               "pays for in its other rooms (people in a meeting trickle in)", min=0,
                               max=60)
    settle: float = opt(5.0, "seconds between a room's validation and its measurement, for the joins' "
                        "burst to pass and bitrates to settle", min=0, max=600)
    ramp_samples: int = opt(11, "getStats samples taken after each room validates (11 at 1 s: a "
                            "10-s window)", min=2, max=1000)
    target_samples: int = opt(11, "getStats samples taken at target load", min=2, max=10000)
    network_samples: int = opt(11, "getStats samples taken under each network profile of the degrade "
                               "shape", min=2, max=10000)
    sample_interval: float = opt(1.0, "seconds between the samples of one measurement", min=0.2,
                                 max=60)
    background_interval: float = opt(5.0, "seconds between background samples through the whole "
                                     "run; 0 turns them off", min=0, max=3600)
    quality_frames: int = opt(2, "frames of each received video captured after each measurement "
                              "and scored after the run (BRISQUE, PSNR, SSIM, VMAF); 0 turns "
                              "scoring off", min=0, max=100)
    audio_seconds: float = opt(6.0, "seconds of every received audio track, and of its own microphone, "
                               "each browser records in a measured window (at most the window's length): "
                               "scored after the run against the microphone's speech (ViSQOL, PESQ) and "
                               "timed by its audio codes (mouth-to-ear delay); 0: none",
                               min=0, max=60, scenario=False)
    audio_windows: str = opt("target", "the measured windows browsers record in: target (the run's last, at "
                             "its most participants: seconds of scoring after the run), all (every ramp, "
                             "target and network window: ViSQOL against participants, some seconds of "
                             "scoring per recording)", choices=("target", "all"), scenario=False)
    play_audio: bool = opt(False, "play received audio out unmuted (it is decoded and played out muted "
                           "either way: its jitter buffer's figures need it)", scenario=False)
    render_video: bool = opt(False, "render received video in the page (costs the clients CPU; "
                             "every frame is measured either way)", scenario=False)
    audio_processing: bool = opt(False, "keep the microphone's echo canceller, noise suppressor "
                                 "and gain control on")
    sfu_cpus: float = opt(AUTO, "CPU budget of the SFU, in cores (a cgroup CFS quota); 0: none. auto: in "
                          "the local lab, a ramp to the knee with synthetic participants gets a budget sized to "
                          "this machine (sfubench/calibrate.py: the cheapest SFU's knee well within what the "
                          "clients carry, what the machine leaves it beside them and what the ramp reaches in its "
                          "minutes, measured once and cached), "
                          "any other run "
                          f"{LAB_SFU_CORES:g} core; none on a remote host (its machine is its budget)",
                          min=0, max=1024, kind="float")
    cpu_period_ms: float = opt(10.0, "CFS period of the CPU quotas, in ms: a group that spends its quota "
                               "early waits out the rest of the period, so a short one (as a tuned "
                               "deployment's) keeps a throttled SFU's stalls short", min=1, max=1000)
    client_cpus: float = opt(0.0, "CPU quota of the clients (grid and browsers), in cores; 0: "
                             "none. A run whose clients have headroom under a quota also has it "
                             "on a slower machine", min=0, max=1024, scenario=False)
    sfu_cpuset: str = opt(AUTO, "CPUs the SFU is pinned to, e.g. 0 or 0-1 (a cpuset); empty: any. auto: "
                          "CPU 0 in the local lab of a machine of two or more, so the SFU and the load "
                          "generator do not share a core; none elsewhere", metavar="LIST", kind="str")
    client_cpuset: str = opt(AUTO, "CPUs the clients are pinned to; empty: any. auto: the CPUs after "
                             "the SFU's in the local lab of a machine of two or more; none elsewhere",
                             metavar="LIST", scenario=False, kind="str")
    network: str = opt("none", "network profile of the lab's link: none, a profile of sfubench/networks.toml "
                       "(lan, metro-17ms, transatlantic-180ms, antipodes-360ms, lossy-2pct, 3g, bad-wifi) "
                       "or a .toml file holding one; applied by a link emulator in user space",
                       metavar="NAME|FILE")
    synthetic_network: str = opt("", "network profile for the synthetic participants alone (as --network; "
                                 "they get an address of their own on the clients' side); empty: the "
                                 "same link as the browsers", metavar="NAME|FILE")
    sfu_profile: str = opt(AUTO, "the adapter's profile: defaults (as the package ships) or "
                           "tuned (as its makers advise for production on this machine); "
                           "`sfubench list-sfus` lists each adapter's. auto: tuned where the adapter "
                           "has one (its threads set for the SFU's cores), else defaults", metavar="NAME")
    sfu_options: str = opt("", "adapter options as key=value[,key=value], e.g. bitrate=5000000 "
                           "(recorded in the run's metadata)", metavar="K=V,...", scenario=False)
    out: str = opt("runs", "folder that receives one run folder per run", metavar="DIR", scenario=False)
    cache: str = opt("~/.cache/sfubench", "cache for slow builds (media, grid jars, SFU builds), "
                     "keyed by version", metavar="DIR", scenario=False)
    results_db: str = opt("", "results database every run is recorded in: a SQLite path or a "
                          "postgresql:// URL; empty means <out>/results.sqlite", metavar="PATH|URL", scenario=False)
    output: str = opt("report,history", "where results go, in order (comma-separated): " + ", ".join(
        f"{name} ({o.__doc__})" for name, o in outputs.OUTPUTS.items()) +
        " (sfubench/outputs/)", metavar="NAME,...", scenario=False)
    grid_url: str = opt("", "Selenium Grid to use; empty starts a local standalone grid in the "
                        "lab's client namespace", metavar="URL", scenario=False)
    sfu_address: str = opt("", "address of an SFU already running elsewhere (a cloud host's `sfubench "
                           "serve`, from Terraform's outputs); then no lab is built and --grid-url is "
                           "needed; empty starts the SFU in the local lab", metavar="ADDR", scenario=False)
    page_address: str = opt("", "address the engine serves the client pages on, one the grid's nodes "
                            "reach (with --sfu-address); empty: 127.0.0.1, for the local lab",
                            metavar="ADDR", scenario=False)
    node_cache: str = opt("", "the cache folder on the grid's nodes where `sfubench media --cache DIR` "
                          "put the fake media (with --sfu-address); empty: the same as --cache",
                          metavar="DIR", scenario=False)
    client_probes: str = opt("", "URL of the probe the remote grid's nodes answer (sfubench/agent.py "
                             "in each node; a name may resolve to one address per node, as a headless "
                             "Service's does), so the clients' CPU is measured (with --sfu-address); "
                             "empty: it is not, and the report says so", metavar="URL", scenario=False)
    synthetic_generators: str = opt("", "URL where sfubench-synth generators already running on other "
                                    "hosts take commands (`sfubench-synth -listen`, POST /command; a name "
                                    "may resolve to one address per generator): with --sfu-address, they "
                                    "carry the synthetic participants", metavar="URL", scenario=False)
    lab_prefix: str = opt("sfub", "name prefix of the lab's network namespaces and links", scenario=False)
    lab_subnet: str = opt("127.0.1", "first three octets of the lab's /24 inside 127.0.0.0/8",
                          metavar="A.B.C", scenario=False)

    def __post_init__(self):
        """Checks the settings as given: each site's "auto" were resolved before (load())."""
        for f in dataclasses.fields(self):
            value, meta = getattr(self, f.name), f.metadata
            flag = flag_of(f.name)
            if meta["min"] is not None and value < meta["min"]:
                raise ConfigError(f"{flag} must be at least {meta['min']}, got {value}")
            if meta["max"] is not None and value > meta["max"]:
                raise ConfigError(f"{flag} must be at most {meta['max']}, got {value}")
            if meta["choices"] and value not in meta["choices"]:
                raise ConfigError(f"{flag} must be one of {', '.join(meta['choices'])}, got {value!r}")
        if self.svc and (self.simulcast < 2 or self.codec not in SVC_CODECS):
            raise ConfigError(f"--svc makes the --simulcast layers spatial layers of one {' or '.join(SVC_CODECS)} "
                              f"stream: it needs --simulcast 2 or 3 and --codec {' or '.join(SVC_CODECS)}")
        sfus = available_sfus()
        if self.sfu not in sfus:
            raise ConfigError(f"unknown SFU {self.sfu!r}; available: {', '.join(sfus)}")
        if not LAB_PREFIX.fullmatch(self.lab_prefix):
            # it names namespaces, links (15 characters at most), cgroups and a lock file under /run
            raise ConfigError(f"--lab-prefix must be a lowercase letter and up to 11 lowercase letters or "
                              f"digits, got {self.lab_prefix!r}")
        if self.page_address and _unspecified(self.page_address):
            raise ConfigError(f"--page-address must be one address the grid's nodes reach, not "
                              f"{self.page_address!r}: that would serve the pages on every interface")
        octets = self.lab_subnet.split(".")
        if (len(octets) != 3 or octets[0] != "127" or self.lab_subnet == "127.0.0"
                or not all(o.isdigit() and 0 <= int(o) <= 255 for o in octets)):
            raise ConfigError(f"--lab-subnet must be three octets inside 127.0.0.0/8 other than "
                              f"127.0.0 (the clients' own sites), got {self.lab_subnet!r}")
        for name in ("sfu_cpuset", "client_cpuset"):
            try:
                cpus = cpu_list(getattr(self, name))
            except ValueError:
                cpus = None
            if cpus is None or any(c >= (os.cpu_count() or 1) for c in cpus):
                raise ConfigError(f"--{name.replace('_', '-')} must list CPUs of this machine "
                                  f"(0-{(os.cpu_count() or 1) - 1}) as e.g. 0 or 0-1 or 0,2, got "
                                  f"{getattr(self, name)!r}")
        self.sfu_option_map()  # validates the syntax early
        outputs.check(self)

    @property
    def auto(self) -> frozenset:
        """The settings that were left at auto, resolved by load() for the site (a copy made with
        dataclasses.replace knows none)."""
        return getattr(self, "_auto", frozenset())

    @property
    def rooms_cap(self) -> int:
        """The most rooms the shape may add."""
        return shapes.SHAPES[self.shape].rooms_cap(self)

    @property
    def participants(self) -> int:
        """The most participants the run may have."""
        return self.rooms_cap * self.users_per_room

    def real(self, room: int, index: int) -> bool:
        """Whether the `index`-th participant (from 1) of room `room` (from 1) is a browser."""
        return room <= self.real_rooms and index <= self.real_per_room

    def publishes(self, user: str) -> bool:
        """Whether participant `user` (r<room>u<n>) publishes, or only watches."""
        return not self.publishers_per_room or int(user.rpartition("u")[2]) <= self.publishers_per_room

    def receive_layer_of(self, user: str) -> str:
        """The layer participant `user` (r<room>u<n>) asks for: largest, half or smallest."""
        if self.receive_layer == "mix":
            return "smallest" if int(user.rpartition("u")[2]) % 2 == 0 else "largest"
        if self.receive_layer == "tile":
            return tile_layer(self.users_per_room - 1)
        return self.receive_layer

    @property
    def browser_participants(self) -> int:
        """The most browser participants the run may have (the rest are synthetic)."""
        return min(self.rooms_cap, self.real_rooms) * min(self.users_per_room, self.real_per_room)

    def sfu_option_map(self) -> dict[str, str]:
        out = {}
        for item in filter(None, (s.strip() for s in self.sfu_options.split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--sfu-options wants key=value pairs, got {item!r}")
            out[key.strip()] = value.strip()
        return out

    def sfu_cores(self) -> int:
        """The cores the SFU may use: its quota, its cpuset, or the machine's."""
        if self.sfu_cpus:
            return max(1, math.ceil(self.sfu_cpus))
        if self.sfu_cpuset:
            return len(cpu_list(self.sfu_cpuset))
        return os.cpu_count() or 1

    def results_db_path(self) -> str:
        return self.results_db or str(Path(self.out) / "results.sqlite")

    def cache_dir(self) -> Path:
        return Path(os.path.expanduser(self.cache))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def redacted(self) -> dict:
        """as_dict with every URL's password replaced by *** (meta.json, the report, `sfubench
        config`): a password belongs in the environment or libpq's ~/.pgpass, never in a run folder."""
        return {k: redact(v) if isinstance(v, str) else v for k, v in self.as_dict().items()}

    def scenario(self) -> dict:
        """The settings that define the scenario (see opt), recorded in every run's metadata."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata["scenario"]}

    @classmethod
    def scenario_defaults(cls) -> dict:
        """The defaults of the scenario settings, recorded beside the scenario: a run made before a
        setting existed ran as its default does, so comparisons and trends can still set them side
        by side."""
        return {f.name: f.default for f in dataclasses.fields(cls) if f.metadata["scenario"]}


Config = dataclasses.make_dataclass(
    "Config", [(name, type(f.default).__name__, f) for name, f in {**shapes.options(), **outputs.options()}.items()],
    bases=(Settings,), frozen=True, namespace={"__module__": __name__})
FIELDS = {f.name: f for f in dataclasses.fields(Config)}
# the names users write (flag without dashes, file key, in snake case) -> the setting's
BY_PUBLIC = {public(name, f.metadata): name for name, f in FIELDS.items()}


def as_toml(values: dict) -> str:
    """Settings as a --config file, under the names users write (their values are strings, numbers
    and booleans; JSON's strings are TOML's)."""
    return "".join(f"{public(name, FIELDS[name].metadata).replace('_', '-')} = {json.dumps(v)}\n"
                   for name, v in values.items())


def flag_of(name: str) -> str:
    return "--" + public(name, FIELDS[name].metadata).replace("_", "-")


def env_of(name: str) -> str:
    return ENV_PREFIX + public(name, FIELDS[name].metadata).upper()


def cpu_list(spec: str) -> list[int]:
    """CPU numbers of a cpuset list such as "0-1,3"; ValueError if malformed."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        lo, dash, hi = part.partition("-")
        first, last = int(lo), int(hi) if dash else int(lo)
        if first < 0 or last < first:
            raise ValueError(spec)
        out.extend(range(first, last + 1))
    return out


TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
URL_PASSWORD = re.compile(r"(?P<user>\b[a-z][a-z0-9+.-]*://[^/:@\s]*:)[^@/\s]*@", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with the password of every URL in it (scheme://user:password@host) shown as ***."""
    return URL_PASSWORD.sub(lambda m: m["user"] + "***@", text)


LAB_PREFIX = re.compile(r"[a-z][a-z0-9]{0,11}")


def _unspecified(address: str) -> bool:
    """Whether binding to `address` would bind every interface: 0.0.0.0, ::, and the short forms
    the resolver reads as an IPv4 address (0, 0.0.0, 0x0)."""
    address = address.strip("[]")
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(address)).is_unspecified
    except OSError:
        return False   # a host name


def _coerce(name: str, raw, source: str):
    f = FIELDS[name]
    kind = f.metadata["kind"] or f.type
    flag = flag_of(name)
    if f.metadata["repeat"] and isinstance(raw, (list, tuple)):
        raw = SEPARATOR.join(str(r) for r in raw)
    if f.default == AUTO and isinstance(raw, str) and raw.strip().lower() == AUTO:
        return AUTO
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower()
        if word in TRUE or word in FALSE:
            return word in TRUE
        raise ConfigError(f"{flag} ({source}) wants true or false, got {raw!r}")
    try:
        if kind == "int":
            if isinstance(raw, float) or isinstance(raw, bool):
                raise ValueError
            return int(raw)
        if kind == "float":
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
            if not math.isfinite(value):   # NaN passes every comparison with a bound
                raise ValueError
            return value
        return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{flag} ({source}) wants {'an integer' if kind == 'int' else 'a finite number'}"
                          f"{' or auto' if f.default == AUTO else ''}, got {raw!r}") from None


PRESETS = Path(__file__).with_name("presets")


def presets() -> dict[str, str]:
    """name -> description of every preset shipped in sfubench/presets/."""
    return {p.stem: tomllib.loads(p.read_text()).get("description", "")
            for p in sorted(PRESETS.glob("*.toml"))}


def _settings_file(path: Path, what: str, extra: tuple[str, ...] = ()) -> dict:
    """The raw settings of a TOML file, keys as setting names; `extra` keys are allowed and dropped."""
    try:
        data = tomllib.loads(path.read_text())
    except (FileNotFoundError, IsADirectoryError):
        raise ConfigError(f"{what} {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{what} {path}: {e}") from None
    out = {}
    for key, raw in data.items():
        if key in extra:
            continue
        if key.replace("-", "_") not in BY_PUBLIC:
            raise ConfigError(f"{what} {path}: unknown setting {key!r}")
        out[BY_PUBLIC[key.replace("-", "_")]] = raw
    return out


def preset_settings(spec: str) -> dict:
    """The settings preset `spec` (a name of sfubench/presets/ or a .toml file) stands for."""
    if spec.endswith(".toml"):
        path = Path(spec).expanduser()
    else:
        path = PRESETS / f"{spec}.toml"
        if not path.is_file():
            raise ConfigError(f"unknown preset {spec!r}; available: {', '.join(presets())} (or a .toml file)")
    values = _settings_file(path, "preset", extra=("description",))
    if "preset" in values:
        raise ConfigError(f"preset {path}: a preset cannot name another preset")
    return values


def load(cli: dict | None = None, env: dict | None = None, file: str | Path | None = None,
         site=None) -> Config:
    """Builds the Config from its sources. `cli` holds only the flags the user gave. The "auto"
    settings are the site's to resolve, and the settings it cannot honour its to refuse: `site`, a
    kind of sites.Site (a cloud run's is remote before its provisioner gives the SFU's address),
    else the one the settings name (sites.kind_for)."""
    env = os.environ if env is None else env
    layers = []   # lowest first: (raw settings, how to name their source)
    from_file = _settings_file(Path(file), "config file") if file else {}
    from_env = {name: env[env_of(name)] for name in FIELDS if env_of(name) in env}
    from_cli = {name: raw for name, raw in (cli or {}).items() if raw is not None}
    preset = str(next((layer["preset"] for layer in (from_cli, from_env, from_file) if "preset" in layer),
                      FIELDS["preset"].default))
    layers = [(preset_settings(preset), lambda name: f"in preset {preset}"),
              (from_file, lambda name: f"in {file}"),
              (from_env, lambda name: f"from {env_of(name)}"),
              (from_cli, lambda name: "on the command line")]
    values: dict = {}
    for raw_values, source in layers:
        for name, raw in raw_values.items():
            values[name] = _coerce(name, raw, source(name))
    from . import sites   # the sites know what "auto" stands for where they are
    full = {name: values.get(name, f.default) for name, f in FIELDS.items()}
    if full["svc"] and not any("simulcast" in raw for raw, _ in layers):
        full["simulcast"] = SVC_LAYERS
    if full["shape"] in shapes.SHAPES:   # an unknown one is refused with the other bad values
        # what the user set (not a preset), to a value other than the default
        given = {name for name in {*from_file, *from_env, *from_cli} if values[name] != FIELDS[name].default}
        _refuse_foreign(full["shape"], given)
        full = shapes.SHAPES[full["shape"]].adopt(full, given)
    kind = site or sites.kind_for(full)
    cfg = Config(**kind.defaults(derived(full)))
    object.__setattr__(cfg, "_auto", frozenset(name for name, value in full.items() if value == AUTO))
    kind.refuse(cfg)
    return cfg


def foreign_to(shape: str) -> set[str]:
    """The other shapes' own settings, which `shape` does not use."""
    return set(shapes.options()) - set(shapes.SHAPES[shape].options)


def _refuse_foreign(shape: str, given: set[str]) -> None:
    """ConfigError for another shape's own setting that the user set: it would be ignored."""
    for name in sorted(given & foreign_to(shape)):
        owners = [other.name for other in shapes.SHAPES.values() if name in other.options]
        whose = f"the {owners[0]} shape's" if len(owners) == 1 else \
            f"the {', '.join(owners[:-1])} and {owners[-1]} shapes'"
        raise ConfigError(f"{flag_of(name)} is {whose} setting; --shape {shape} does not use it (add --shape "
                          f"{', '.join(owners[:-1]) + ' or ' if owners[:-1] else ''}{owners[-1]}, or leave it out)")


def add_arguments(parser) -> None:
    """Adds one flag per setting; defaults stay None so load() can tell given from default."""
    parser.add_argument("--config", metavar="FILE", help="TOML file with settings (keys as below)")
    for name, f in FIELDS.items():
        meta = f.metadata
        extra = dict(nargs="?", const="true", metavar="BOOL") if f.type == "bool" else \
            dict(metavar=meta["metavar"] or name.upper())
        if meta["repeat"]:
            extra["action"] = "append"
        parser.add_argument(flag_of(name), dest=name, default=None,
                            help=f"{meta['help']} (default: {f.default!r}; env {env_of(name)})".replace("%", "%%"),
                            **extra)


def markdown() -> str:
    lines = ["# Settings", "",
             "Generated from `sfubench/config.py` by `sfubench config --markdown`; do not edit by hand.",
             "", "Each setting is a flag, an environment variable and a key of the `--config` TOML file.",
             "Precedence, lowest first: default, preset, file, environment, flag. Settings marked *scenario* "
             "shape what the SFU is put through: `compare` refuses runs that differ in them, and trends "
             "keep such runs apart. A default of `auto` is resolved for where the run goes (the local lab "
             "or a remote SFU and grid), and the run records what it resolved to.", "",
             "| flag | env | default | scenario | meaning |", "|---|---|---|---|---|"]
    for name, f in FIELDS.items():
        meta = f.metadata
        rng = ""
        if meta["min"] is not None:
            rng = f" ({meta['min']}–{meta['max']})"
        lines.append(f"| `{flag_of(name)}` | `{env_of(name)}` | "
                     f"`{f.default!r}` | {'yes' if meta['scenario'] else ''} | {meta['help']}{rng} |")
    lines += ["", "## Presets", "", "`--preset NAME` starts from one of these files of `sfubench/presets/` "
              "(or `--preset FILE.toml`, a file of your own with the same keys and a `description`).", ""]
    for name, description in presets().items():
        chosen = preset_settings(name)
        lines.append(f"- **{name}**: {description}. "
                     + ("Sets " + ", ".join(f"`{k.replace('_', '-')} = {v!r}`" for k, v in chosen.items()) + "."
                        if chosen else "Sets nothing: the defaults above are this preset."))
    return "\n".join(lines) + "\n"
