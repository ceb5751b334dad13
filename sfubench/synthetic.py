"""Synthetic participants: the engine's side of sfubench-synth (synth/, Go on pion).

Locally one process carries every synthetic participant of a run, started in the clients'
namespace and cgroup the first time one joins, so its CPU counts (and is capped) with the
browsers'; the engine tells it who joins and who leaves, one JSON line each on its stdin. In a
remote run, generators already running on other hosts (`sfubench-synth -listen`) take the same
commands over HTTP. Either way they report to the collector over the page contract, as a page
does, and what they cost themselves (their pacing error) arrives as `generator` records the
client-bound rule reads.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request
from pathlib import Path

from . import gobuild
from .config import ROOT
from .agent import TOKEN_ENV, TOKEN_HEADER, host_urls, read_bounded

SOURCES = (ROOT / "synth", ROOT / "sfu" / "inhouse")   # synth imports the in-house SFU's client
STOP_S = 10.0       # leaving every room at the end may take this long
GENERATOR_PORT = 9480   # where `sfubench generate` takes a remote run's commands (POST /command)


class SyntheticError(RuntimeError):
    pass


def join_command(user: str, room: int, params: dict[str, str], receive_layer: str, publish: bool) -> dict:
    """A join as sfubench-synth takes it (synth/main.go). The participant keeps its frames from the
    start (`follow`), until the engine says otherwise: its first frame of each video times its join."""
    return {"cmd": "join", "user": user, "room": room, "params": params, "receive_layer": receive_layer,
            "follow": True, **({} if publish else {"publish": False})}


def build(cache: Path) -> Path:
    """The sfubench-synth binary for the current sources, built once into the cache (about a minute)."""
    try:
        return gobuild.build("sfubench-synth", ROOT / "synth", SOURCES, cache)
    except gobuild.GoBuildError as e:
        raise SyntheticError(str(e)) from None


class Generator:
    """The sfubench-synth process of a run: `synth` is what the engine prepared for it (its
    `binary`, `driver`, the clip `encoded` per layer and its `fps`). `wrap` makes its argv join the
    clients' cgroup; it inherits the engine's network namespace (the clients'); `token`, the run's,
    goes to it in its environment."""

    def __init__(self, synth: dict, collect_url: str, client_ip: str, log: Path, token: str,
                 wrap=lambda argv: argv):
        encoded = synth["encoded"]
        self.argv = wrap([str(synth["binary"]), "-driver", synth["driver"], "-collect", collect_url,
                          "-video", ",".join(map(str, encoded.video)), *(["-svc"] if encoded.svc else []),
                          "-audio", str(encoded.ogg),
                          "-fps", str(synth["fps"]), "-client-ip", client_ip,
                          "-rtt-ms", f"{synth['rtt_ms']:g}"])
        self.log_path = log
        self.env = {**os.environ, TOKEN_ENV: token}
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        if self.proc is None:
            log = open(self.log_path, "ab")
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True, env=self.env)
            finally:
                log.close()
        return self.proc

    def _send(self, cmd: dict) -> None:
        with self.lock:
            proc = self._start()
            if proc.poll() is not None:
                return   # exited: failure() says so, and its participants are failed
            try:
                proc.stdin.write(json.dumps(cmd).encode() + b"\n")
                proc.stdin.flush()
            except BrokenPipeError:
                pass

    def join(self, user: str, room: int, params: dict[str, str], receive_layer: str = "largest",
             publish: bool = True) -> None:
        """`params`: the adapter's client parameters for this participant (a token among them:
        they go to the process's stdin, never its command line or the run folder);
        `receive_layer`: the simulcast layer it asks for (largest, half or smallest); `publish`:
        false for a viewer, which sends no media."""
        self._send(join_command(user, room, params, receive_layer, publish))

    def leave(self, user: str) -> None:
        self._send({"cmd": "leave", "user": user})

    def failure(self) -> str | None:
        """Why the process ended, if it did: a one-line reason with the end of its log."""
        if self.proc is None or self.proc.poll() is None:
            return None
        try:
            tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
        except OSError:
            tail = []
        return (f"the synthetic participants' process exited with status {self.proc.returncode}"
                + (f" ({' / '.join(tail)})" if tail else ""))

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def stop(self) -> None:
        """Every participant leaves (end of input), then the process exits; killed if it does not."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class RemoteGenerators:
    """Synthetic participants carried by sfubench-synth generators already running elsewhere
    (`-listen`: a cloud's synth pods, the miniature's node), at `url` (POST /command; its host may
    resolve to one address per generator, or `addresses()` lists them). Each join goes to the one
    carrying the fewest, with this engine's /collect URL, where it reports as a local generator
    does. One that cannot be reached fails that participant, with the reason (`failed(user,
    reason)`); one that dies leaves its participants silent, which fails them as a silent page."""

    def __init__(self, url: str, collect_url: str, failed, token: str, addresses=None, timeout: float = 5.0):
        self.url, self.collect_url, self.failed, self.token = url, collect_url, failed, token
        self.addresses, self.timeout = addresses, timeout
        self.carrying: dict[str, set[str]] = {}    # a generator's URL -> the users it carries
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _post(self, url: str, cmd: dict) -> None:
        request = urllib.request.Request(url, json.dumps(cmd).encode(), {"Content-Type": "application/json",
                                                                         TOKEN_HEADER: self.token})
        with self._opener.open(request, timeout=self.timeout) as r:
            read_bounded(r)

    def join(self, user: str, room: int, params: dict[str, str], receive_layer: str = "largest",
             publish: bool = True) -> None:
        try:
            generators = list(host_urls(self.url, self.addresses).values())
        except OSError as e:
            generators, why = [], str(e)
        else:
            why = "none is listed"
        if not generators:
            self.failed(user, f"no synthetic generator at {self.url} ({why})")
            return
        url = min(generators, key=lambda g: (len(self.carrying.get(g, ())), g))
        try:
            self._post(url, {**join_command(user, room, params, receive_layer, publish), "collect": self.collect_url})
        except OSError as e:
            self.failed(user, f"its synthetic generator at {url} could not be reached: {e}")
            return
        self.carrying.setdefault(url, set()).add(user)

    def leave(self, user: str) -> None:
        for url, users in self.carrying.items():
            if user in users:
                users.discard(user)
                try:
                    self._post(url, {"cmd": "leave", "user": user})
                except OSError:
                    pass   # gone with its generator

    def failure(self) -> str | None:
        return None

    def pids(self) -> list[int]:
        return []

    def stop(self) -> None:
        """Every participant leaves; the generators stay up for the next run."""
        for users in list(self.carrying.values()):
            for user in list(users):
                self.leave(user)
