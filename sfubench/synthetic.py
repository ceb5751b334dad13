"""Synthetic participants: the engine's side of sfubench-synth (synth/, Go on pion).

One process carries every synthetic participant of a run, started in the clients' namespace and
cgroup the first time one joins, so its CPU counts (and is capped) with the browsers'. It reports
to the collector over the page contract, as a page does; the engine only tells it who joins and
who leaves, one JSON line each on its stdin. What it costs itself (its pacing error) arrives as
`generator` records the client-bound rule reads.
"""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from . import gobuild
from .config import ROOT

SOURCES = (ROOT / "synth", ROOT / "sfu" / "inhouse")   # synth imports the in-house SFU's client
STOP_S = 10.0       # leaving every room at the end may take this long


class SyntheticError(RuntimeError):
    pass


def build(cache: Path) -> Path:
    """The sfubench-synth binary for the current sources, built once into the cache (about a minute)."""
    try:
        return gobuild.build("sfubench-synth", ROOT / "synth", SOURCES, cache)
    except gobuild.GoBuildError as e:
        raise SyntheticError(str(e)) from None


class Generator:
    """The sfubench-synth process of a run. `wrap` makes its argv join the clients' cgroup; it
    inherits the engine's network namespace (the clients')."""

    def __init__(self, binary: Path, driver: str, collect_url: str, encoded, fps: int, client_ip: str,
                 log: Path, wrap=lambda argv: argv):
        self.argv = wrap([str(binary), "-driver", driver, "-collect", collect_url, "-video", str(encoded.ivf),
                          "-audio", str(encoded.ogg), "-fps", str(fps), "-client-ip", client_ip])
        self.log_path = log
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        if self.proc is None:
            log = open(self.log_path, "ab")
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
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

    def join(self, user: str, room: int, params: dict[str, str]) -> None:
        """`params`: the adapter's client parameters for this participant (a token among them:
        they go to the process's stdin, never its command line or the run folder)."""
        self._send({"cmd": "join", "user": user, "room": room, "params": params})

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
