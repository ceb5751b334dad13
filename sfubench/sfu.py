"""SFU adapters: a folder of data in sfu-configs/<name>/ (see docs/contracts.md). Everything the
engine knows about an SFU comes from there, so adding one never touches the engine."""
from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import json
import math
import os
import re
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from secrets import token_urlsafe
from urllib.parse import urlencode

from .config import CODECS, ROOT, SVC_CODECS, SYNTHETIC_CODECS, ConfigError
from .settings import AUTO
from .sfuserver import AdapterError, Server

PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")

# A participant's token is minted as it joins (and again as it rejoins): it needs to outlive the
# join, not the run, and a token seen on the wire is worth little ten minutes later.
TOKEN_TTL_S = 600
# An application's rejoin where the SFU's official client has none of its own (janus.js, mediasoup-client):
# a second, then twice as long each time up to 8 s, for about a minute.
RECONNECT_S = (1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0)


def render(text: str, values: dict[str, str], where: str) -> str:
    """Replaces {name} placeholders and leaves every other brace alone: SFU config formats such as
    Janus's libconfig are full of braces of their own."""
    def sub(m):
        if m.group(1) not in values:
            raise AdapterError(f"{where}: unknown placeholder {{{m.group(1)}}}")
        return str(values[m.group(1)])
    return PLACEHOLDER.sub(sub, text)


def profiles_of(data: dict) -> dict[str, dict]:
    """An adapter's profiles: `defaults` (what the package does out of the box) and whatever its
    sfu.toml adds, e.g. `tuned` (what its makers advise for production on the machine)."""
    return {"defaults": {"description": "as the package ships"}, **data.get("profiles", {})}


def resolve_profile(profile: str, profiles: dict) -> str:
    """`auto` is `tuned` where the adapter has one, else `defaults`: on a CPU budget an SFU runs
    the thread count a deployment of that size would (Janus's thread per handle is no such
    deployment: with one core it reached 1.3-1.5x its half-core knee, one event loop 2.0x)."""
    if profile == AUTO:
        return "tuned" if "tuned" in profiles else "defaults"
    return profile


def _option(sfu: str, key: str, value: str, default):
    """`value` as the type of the option's default in sfu.toml, or a one-line ConfigError. A number
    option is a count, a size or a rate: finite and at least 0 (docs/adding-an-sfu.md)."""
    kind = type(default)
    try:
        if kind is bool:
            word = value.strip().lower()
            if word not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise ValueError
            return word in ("1", "true", "yes", "on")
        out = kind(value)
        if kind in (int, float) and not (math.isfinite(out) and out >= 0):
            raise ValueError
        return out
    except ValueError:
        wants = {bool: "true or false", int: "an integer >= 0", float: "a number >= 0"}.get(kind, "a string")
        raise ConfigError(f"--sfu-options: {sfu} option {key} wants {wants} (default {default!r}), "
                          f"got {value!r}") from None


def _jwt(claims: dict, secret: str) -> str:
    """An HS256 JSON web token: what SFUs such as LiveKit take as a participant's credentials."""
    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = b64(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


def _render_tree(tree, values: dict[str, str], where: str):
    if isinstance(tree, dict):
        return {k: _render_tree(v, values, f"{where}.{k}") for k, v in tree.items()}
    if isinstance(tree, list):
        return [_render_tree(v, values, where) for v in tree]
    return render(tree, values, where) if isinstance(tree, str) else tree


def secret_variable(sfu: str, key: str) -> str:
    return f"SFUBENCH_{sfu.upper()}_{key.upper()}"


@dataclass
class Adapter:
    """An SFU adapter as loaded for one run: its data, the profile chosen, the options that result,
    and the run's secrets (generated unless the environment gives them; never written anywhere)."""
    name: str
    folder: Path
    data: dict
    options: dict = field(default_factory=dict)
    profile: str = "defaults"
    secrets: dict = field(default_factory=dict, repr=False)
    cores: int = 1   # what the SFU may use: {cores} to its profiles, its [env] and its templates

    @classmethod
    def load(cls, name: str, overrides: dict[str, str] | None = None, profile: str = "defaults",
             cores: int | None = None) -> "Adapter":
        """The adapter `name` with `profile`'s options, then `overrides` (--sfu-options) on top.
        `cores` is what the SFU may use ({cores} in a profile's values)."""
        folder = ROOT / "sfu-configs" / name
        try:
            data = tomllib.loads((folder / "sfu.toml").read_text())
        except FileNotFoundError:
            raise AdapterError(f"no adapter {name!r} (expected {folder}/sfu.toml)") from None
        for key in ("name", "version", "released", "client", "start", "health"):
            if key not in data:
                raise AdapterError(f"{folder}/sfu.toml lacks {key!r}")
        unknown = [c for c in data.get("codecs", []) if c not in CODECS]
        if unknown:
            raise AdapterError(f"{folder}/sfu.toml: codecs {unknown} are none of {list(CODECS)}")
        synthetic = data.get("synthetic", {}).get("codecs", [])
        unknown = [c for c in synthetic if c not in SYNTHETIC_CODECS or c not in data.get("codecs", [])]
        if unknown:
            raise AdapterError(f"{folder}/sfu.toml: synthetic codecs {unknown} are not of its codecs among "
                               f"{list(SYNTHETIC_CODECS)} (what synthetic participants send)")
        layered = [c for c in data.get("simulcast_codecs", []) if c not in data.get("codecs", [])]
        if layered:
            raise AdapterError(f"{folder}/sfu.toml: simulcast_codecs {layered} are not of its codecs")
        not_svc = [c for c in data.get("svc", []) if c not in SVC_CODECS or c not in data.get("codecs", [])]
        if not_svc:
            raise AdapterError(f"{folder}/sfu.toml: svc {not_svc} are not of its codecs among {list(SVC_CODECS)}")
        not_svc = [c for c in data.get("synthetic", {}).get("svc", []) if c not in synthetic]
        if not_svc:
            raise AdapterError(f"{folder}/sfu.toml: synthetic svc {not_svc} are not of its synthetic codecs")
        profiles = profiles_of(data)
        profile = resolve_profile(profile, profiles)
        if profile not in profiles:
            raise ConfigError(f"--sfu-profile: {name} has no profile {profile!r}; it has: "
                              f"{', '.join(profiles)}")
        options = dict(data.get("options", {}))
        cores = cores or os.cpu_count() or 1
        chosen = {k: render(str(v), {"cores": str(cores)}, f"{name} profile {profile}")
                  for k, v in profiles[profile].get("options", {}).items()}
        for source, items in (("profile " + profile, chosen), ("--sfu-options", overrides or {})):
            for key, value in items.items():
                if key not in options:
                    raise ConfigError(f"{source}: {name} has no option {key!r}; it has: "
                                      f"{', '.join(options) or 'none'}")
                options[key] = _option(name, key, value, options[key])
        secrets = {}
        for key, length in data.get("secrets", {}).items():
            secrets[key] = os.environ.get(secret_variable(name, key)) or token_urlsafe(int(length))
        return cls(name, folder, data, options, profile, secrets, cores)

    def secret_env(self) -> dict[str, str]:
        """The secrets by their environment names: what the engine, a host's `sfubench serve
        --secrets` and the file the runner delivers to it agree on."""
        return {secret_variable(self.name, k): v for k, v in self.secrets.items()}

    def use_secrets(self, env: dict[str, str]) -> None:
        """Takes every secret from `env` (a delivered secrets file): on a host they must be the
        runner's, which mints the participants' tokens, never made up."""
        lacking = [secret_variable(self.name, k) for k in self.secrets if not env.get(secret_variable(self.name, k))]
        if lacking:
            raise AdapterError(f"{self.name}'s secrets lack {', '.join(lacking)}")
        self.secrets = {k: env[secret_variable(self.name, k)] for k in self.secrets}

    @property
    def version(self) -> str:
        return self.data["version"]

    @property
    def released(self) -> str:
        """When that version was released (kept in sfu.toml: nothing is looked up at run time)."""
        return self.data["released"]

    @property
    def self_signed(self) -> bool:
        """Whether its host serves HTTPS with a certificate it made itself."""
        return self.data.get("certificate") == "self-signed"

    def browser_flags(self) -> list[str]:
        """What the run's Chromium needs beyond the usual flags to use this SFU."""
        return ["--ignore-certificate-errors"] if self.self_signed else []

    @property
    def simulcast(self) -> bool:
        """Whether its page publishes the simulcast layers a run asks for (`simulcast = true`)."""
        return self.data.get("simulcast") is True

    @property
    def simulcast_codecs(self) -> list[str]:
        """The codecs the SFU takes as simulcast layers (`simulcast_codecs`; every codec it takes
        without it), from browsers and synthetic participants alike."""
        return list(self.data.get("simulcast_codecs", self.codecs))

    @property
    def svc(self) -> list[str]:
        """The codecs its page publishes as SVC spatial layers when --svc asks (`svc`; none without)."""
        return list(self.data.get("svc", []))

    @property
    def reconnect_s(self) -> tuple[float, ...]:
        """The delays (s) before each attempt to rejoin after its session ended, as its official client
        (or, where that has none, an application) retries: `reconnect_s` in its sfu.toml, else
        RECONNECT_S; none left: it gives up."""
        return tuple(float(d) for d in self.data.get("reconnect_s", RECONNECT_S))

    @property
    def viewers(self) -> bool:
        """Whether its page and its synthetic driver join as viewers, which publish nothing
        (`viewers = true`): without it --publishers-per-room is refused."""
        return self.data.get("viewers") is True

    @property
    def codecs(self) -> list[str]:
        """The video codecs its page publishes when a run asks (`codecs`; VP8 alone without it)."""
        return list(self.data.get("codecs", CODECS[:1]))

    @property
    def where(self) -> list[str]:
        """Where the SFU can run: "local" (the lab on this machine) and/or "cloud"."""
        return list(self.data.get("where", ["local", "cloud"]))

    def cache(self, root: Path) -> Path:
        return root / f"{self.name}-{self.version}"

    def values(self, host, confdir: Path, cache_root: Path, logdir: Path, page_origin: str) -> dict[str, str]:
        """What placeholders stand for; `page_origin`: the host the run's pages are served from (an
        SFU that checks origins lets them in), empty where the server cannot know it."""
        v = {"address": host.address, "interface": host.interface, "confdir": str(confdir),
             "cache": str(self.cache(cache_root)), "logdir": str(logdir), "adapter": str(self.folder),
             "cores": str(self.cores), "page_origin": page_origin}
        v.update({f"port_{k}": str(p) for k, p in self.data.get("ports", {}).items()})
        v.update({f"opt_{k}": str(o) for k, o in self.options.items()})
        return v

    def _with_secrets(self, values: dict[str, str]) -> dict[str, str]:
        return {**values, **{f"secret_{k}": v for k, v in self.secrets.items()}}

    def environment(self, values: dict[str, str]) -> dict[str, str]:
        """The server's environment: this process's plus the adapter's `env`, where secrets may go
        (not into argv, which anyone can list, nor into the rendered config files)."""
        full = self._with_secrets(values)
        return {**os.environ, **{k: render(str(v), full, f"{self.name} env.{k}")
                                 for k, v in self.data.get("env", {}).items()}}

    def assets(self, cache_root: Path) -> Path | None:
        """A folder of the adapter's cache (e.g. its bundled client library) that the engine serves
        at /sfu/<name>/assets/."""
        spec = self.data.get("assets")
        return Path(render(spec, {"cache": str(self.cache(cache_root))}, f"{self.name} assets")) if spec else None

    def install(self, cache_root: Path) -> None:
        script = self.data.get("install")
        if not script:
            return
        cache = self.cache(cache_root)
        cache.mkdir(parents=True, exist_ok=True)
        # Two runs starting at once on a cold cache (a team's runners, the suite's concurrent runs)
        # would build into the same files: the second waits, then finds the build done.
        with open(cache / ".install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run([str(self.folder / script), str(cache)], capture_output=True, text=True)
        if r.returncode:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise AdapterError(f"installing {self.name} failed: {tail[0]}")

    def installed_version(self, cache_root: Path) -> str | None:
        cmd = self.data.get("version_command")
        if not cmd:
            return None
        where = {"cache": str(self.cache(cache_root)), "adapter": str(self.folder)}
        cmd = [render(a, where, f"{self.name} version_command") for a in cmd]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return (r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr).strip() else None

    def client_params(self, room: int, user: str, values: dict[str, str]) -> dict[str, str]:
        """What a participant joins with, page or synthetic: `room` and `user`, the adapter's
        client_params, and a token when the adapter mints one (`[token]`: a JWT with its claims,
        signed with one of its secrets)."""
        params = {"room": str(room), "user": user}
        for key, tmpl in self.data.get("client_params", {}).items():
            params[key] = render(str(tmpl), values, f"{self.name} client_params.{key}")
        spec = self.data.get("token")
        if spec:
            full = self._with_secrets({**values, "room": str(room), "user": user})
            now = int(time.time())
            claims = {"nbf": now - 60, "exp": now + int(spec.get("ttl", TOKEN_TTL_S)),
                      **_render_tree(spec.get("claims", {}), full, f"{self.name} token.claims")}
            params["token"] = _jwt(claims, render(spec["secret"], full, f"{self.name} token.secret"))
        return params

    def client_url(self, base: str, room: int, user: str, values: dict[str, str], probe: str) -> str:
        """The participant page: its client_params and `probe` (the probe's settings, JSON)."""
        params = {**self.client_params(room, user, values), "probe": probe}
        return f"{base}/sfu/{self.name}/{self.data['client']}?{urlencode(params)}"

    @property
    def synthetic_driver(self) -> str | None:
        """The signalling driver of sfubench-synth for this SFU (`[synthetic] driver`), if it has one."""
        return self.data.get("synthetic", {}).get("driver")

    @property
    def synthetic_simulcast(self) -> bool:
        """Whether its synthetic driver publishes the layers --simulcast asks for (`[synthetic]
        simulcast = true`); without it synthetic participants send the full picture alone."""
        return self.data.get("synthetic", {}).get("simulcast") is True

    @property
    def synthetic_codecs(self) -> list[str]:
        """The video codecs its synthetic driver negotiates (`[synthetic] codecs`; VP8 alone without
        it), none without a driver."""
        if not self.synthetic_driver:
            return []
        return list(self.data.get("synthetic", {}).get("codecs", SYNTHETIC_CODECS[:1]))

    @property
    def synthetic_svc(self) -> list[str]:
        """The codecs its synthetic driver publishes as one SVC stream of spatial layers when --svc
        asks (`[synthetic] svc`; none without)."""
        return list(self.data.get("synthetic", {}).get("svc", [])) if self.synthetic_driver else []

    def firewall(self) -> tuple[list[int], list[tuple[int, int]]]:
        """What a host's firewall opens to this SFU's clients: TCP ports and UDP port ranges. A
        `<name>_min`/`<name>_max` pair of `[ports]` is a UDP range, `media` one UDP port, and every
        other port TCP (signalling and HTTP APIs)."""
        ports = self.data.get("ports", {})
        tcp, udp = [], []
        for key, port in ports.items():
            if key.endswith("_min"):
                end = ports.get(key[:-4] + "_max")
                if end is None:
                    raise AdapterError(f"{self.name}: port range {key} has no {key[:-4]}_max")
                udp.append((int(port), int(end)))
            elif key == "media":
                udp.append((int(port), int(port)))
            elif not key.endswith("_max"):
                tcp.append(int(port))
        return tcp, udp

    def attach(self, host, run_dir: Path, timeout: float, page_origin: str) -> "Server":
        """The server someone else started on `host` (a cloud host's `sfubench serve`), known by
        its health check alone; waits up to `timeout` s for it, since a host may still be
        installing."""
        values = self.values(host, run_dir / "sfu-conf", run_dir, run_dir, page_origin)
        server = Server(self.name, self.self_signed, None, run_dir / "sfu.log",
                        render(self.data["health"], values, f"{self.name} health"), values)
        server.wait_healthy(timeout)
        return server

    def start(self, host, run_dir: Path, cache_root: Path, page_origin: str, wrap=lambda argv: argv) -> "Server":
        """Starts the server on `host`, for pages served from `page_origin`; `wrap` turns its argv
        into one that first joins the SFU's cgroup."""
        confdir = run_dir / "sfu-conf"
        confdir.mkdir(parents=True, exist_ok=True)
        values = self.values(host, confdir, cache_root, run_dir, page_origin)
        for name in self.data.get("templates", []):
            text = (self.folder / name).read_text()
            (confdir / name).write_text(render(text, values, f"{self.name}/{name}"))
        argv = [render(a, values, f"{self.name} start") for a in self.data["start"]]

        def launch() -> subprocess.Popen:
            with open(run_dir / "sfu.log", "ab") as log:
                return subprocess.Popen(wrap(host.command(argv)), stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        env=self.environment(values))
        server = Server(self.name, self.self_signed, launch(), run_dir / "sfu.log",
                        render(self.data["health"], values, f"{self.name} health"), values, launch=launch)
        try:
            server.wait_healthy()
        except BaseException:
            server.stop()
            raise
        return server
