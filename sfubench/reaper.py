"""The teardown nothing can skip. A run starts, before it makes anything, a process of its own (its
own session, deaf to SIGINT, SIGTERM and SIGHUP) that holds the read end of a pipe. A run that tears
down as it should tells it so and it exits; a run that ends any other way (a second Ctrl-C, SIGTERM
mid-teardown, SIGKILL, the OOM killer, a crash) closes the pipe without a word, and the reaper then
removes what the run made: the local lab's namespaces, processes and groups (sfubench/lab.py), a
cloud run's hosts and grid (sfubench/cloud/reaper.py), writing what it did to the run folder.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

DONE = b"done"
DEAF_TO = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
ROOT = Path(__file__).resolve().parents[1]


def _deaf() -> None:
    """In the child before it executes: ignored signals stay ignored across exec, so there is no
    moment in its start-up when one of them could still end it."""
    for sig in DEAF_TO:
        signal.signal(sig, signal.SIG_IGN)


class Reaper:
    """The run's side: `python -m module *args` started with the pipe as its stdin and `log` as its
    output; `release()` once the run's own teardown is over."""

    def __init__(self, module: str, args: list[str], log: Path):
        read, self._write = os.pipe()   # both ends non-inheritable: no child of the run keeps it open
        log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "ab")
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", module, *args], stdin=read, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_deaf,
                                         cwd=ROOT)
        finally:
            os.close(read)
            out.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        """The run tore down what it made: the reaper has nothing to do."""
        os.write(self._write, DONE)
        os.close(self._write)
        self.proc.wait()

    def take_over(self) -> None:
        """The run's own teardown failed: the reaper tries again, on its own, as the run goes on."""
        os.close(self._write)


def wait_for_the_run() -> bool:
    """The reaper's side: deaf to the run's signals, waits until the run says it is done (True) or
    ends without a word (False, said)."""
    _deaf()
    if sys.stdin.buffer.read() == DONE:
        return True
    print(f"reaper: the run ended before its teardown: removing what it made (pid {os.getpid()})", flush=True)
    return False
