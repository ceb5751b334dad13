"""A started SFU: its health checked from the clients' side, its log, its end; and the errors an
adapter raises (sfu.py makes the server; the runner and `sfubench serve` watch it)."""
from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class AdapterError(RuntimeError):
    pass


class SfuFailed(AdapterError):
    """The SFU died or stopped answering during the run."""

    def __init__(self, message: str, code: int | None, log: list[str]):
        super().__init__(message)
        self.code = code
        self.log = log


# Health checks failed in a row (about a second apart) before a running SFU counts as hung. An SFU
# starved past its knee answers slowly: at 3, a run of the suite driven past the knee ended as a
# crash before the knee was confirmed. A hung SFU is still named within about ten seconds.
HEALTH_FAILURES = 10

# The lab's addresses never go through a proxy, whatever http_proxy says.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# An SFU host that makes its own certificate (`certificate = "self-signed"`): its health check takes
# it, as the run's browsers are told to; the check asks whether the SFU answers, not who it is.
_unverified = ssl.create_default_context()
_unverified.check_hostname, _unverified.verify_mode = False, ssl.CERT_NONE
_self_signed = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=_unverified))


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


@dataclass
class Server:
    name: str                       # the adapter's
    self_signed: bool               # its host makes its own certificate: the health check takes it
    proc: subprocess.Popen | None   # None: started elsewhere, seen through its health check only
    log: Path
    health: str
    values: dict[str, str]   # the placeholders it was started with; client pages need them too
    unhealthy: int = 0       # health checks failed in a row
    watch_from: object = None   # runs the health checks during the run where it says (see check)
    launch: Callable[[], subprocess.Popen] | None = None   # starts it as it was first started

    def restart(self, timeout: float = 30) -> None:
        """Stops the server and starts it again as it was first started, as a deployment's supervisor
        would for a planned restart; returns once it answers its health check again."""
        if self.launch is None:
            raise AdapterError(f"{self.name} was started elsewhere: this run cannot restart it")
        self.stop()
        self.proc, self.unhealthy = self.launch(), 0
        self.wait_healthy(timeout)

    def wait_healthy(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AdapterError(f"{self.name} exited with {self.proc.returncode} at start; "
                                   f"{self._log_tail()}")
            if self._probe():
                return
            time.sleep(0.2)
        raise AdapterError(f"{self.name} not healthy at {self.health} after {timeout:.0f} s; "
                           f"{self._log_tail()}")

    def _probe(self) -> bool:
        # Health checks run from the clients' side of the lab: the path clients take.
        try:
            if self.health.startswith("tcp://"):
                host, port = self.health[6:].rsplit(":", 1)
                with socket.create_connection((host, int(port)), timeout=1):
                    return True
            opener = _self_signed if self.self_signed else _direct
            with opener.open(self.health, timeout=1) as r:
                return r.status < 500
        except OSError:
            return False

    def check(self) -> None:
        """Raises SfuFailed if the server has exited, or failed HEALTH_FAILURES health checks in a row
        (the caller checks about once a second). `watch_from` (lab.Resident) runs them from the SFU's
        own side when the clients' path is emulated: a link saturated past the knee on purpose
        would otherwise take an SFU that forwards all it can for one that hung."""
        code = None if self.proc is None else self.proc.poll()
        if code is not None:
            raise SfuFailed(f"{self.name} exited with {describe_exit(code)} during the run; "
                            f"{self._log_tail()}", code, self._log_lines())
        if (self.watch_from.call(self._probe) if self.watch_from is not None else self._probe()):
            self.unhealthy = 0
            return
        self.unhealthy += 1
        if self.unhealthy >= HEALTH_FAILURES:
            raise SfuFailed(f"{self.name} stopped answering its health check ({self.health}) "
                            f"{self.unhealthy} times in a row; {self._log_tail()}", None, self._log_lines())

    def _log_lines(self, n: int = 10) -> list[str]:
        try:
            return self.log.read_text(errors="replace").strip().splitlines()[-n:]
        except FileNotFoundError:
            return []

    def _log_tail(self) -> str:
        if self.proc is None:
            return "its log is on its own host"
        lines = self._log_lines(3)
        if not self.log.exists():
            return "no log"
        return "log: " + " | ".join(lines) if lines else "empty log"

    def pids(self) -> list[int]:
        """The server's processes (the `ip netns exec` wrapper execs, so its pid is the server's)."""
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
