"""Synthetic participants: the engine's side of sfubench-synth (synth/, Go on pion).

One process carries every synthetic participant of a run, started in the clients' namespace and
cgroup the first time one joins, so its CPU counts (and is capped) with the browsers'. It reports
to the collector over the page contract, as a page does; the engine only tells it who joins and
who leaves, one JSON line each on its stdin. What it costs itself (its pacing error) arrives as
`generator` records the client-bound rule reads.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
from pathlib import Path

from .config import ROOT

SOURCES = (ROOT / "synth", ROOT / "sfu" / "inhouse")   # synth imports the in-house SFU's client
STOP_S = 10.0       # leaving every room at the end may take this long


class SyntheticError(RuntimeError):
    pass


def build(cache: Path) -> Path:
    """The sfubench-synth binary for the current sources and Go toolchain, built into the cache
    only when they changed (a build takes about a minute)."""
    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True)
    if go.returncode:
        raise SyntheticError("Go >= 1.26 is needed to build the synthetic participants (synth/) "
                             "and is not on PATH")
    h = hashlib.sha256(go.stdout.encode())
    for src in SOURCES:
        for f in sorted(src.rglob("*")):
            if f.name in ("go.mod", "go.sum") or (f.suffix == ".go" and not f.name.endswith("_test.go")):
                h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    binary = cache / "synth" / f"sfubench-synth-{h.hexdigest()[:16]}"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(f".{binary.name}.{os.getpid()}.tmp")
    r = subprocess.run(["go", "build", "-trimpath", "-o", str(tmp), "."], cwd=ROOT / "synth",
                       capture_output=True, text=True, env={**os.environ, "GOFLAGS": "-mod=readonly"})
    if r.returncode:
        tmp.unlink(missing_ok=True)
        raise SyntheticError(f"building synth/ failed: {r.stderr.strip()[-2000:]}")
    tmp.rename(binary)
    for old in binary.parent.glob("sfubench-synth-*"):   # only the current build is ever used
        if old != binary:
            old.unlink(missing_ok=True)
    return binary


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
