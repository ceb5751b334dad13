"""The teardown nothing can skip. A cloud run starts, before it creates anything, a process of its
own (its own session, deaf to SIGINT, SIGTERM and SIGHUP) that holds the read end of a pipe. A run
that tears down as it should tells it so and it exits; a run that ends any other way (a second
Ctrl-C, SIGTERM mid-teardown, SIGKILL, a crash) closes the pipe without a word, and the reaper then
destroys the run's hosts (Terraform, from the state in the run folder) and deletes its grid's
namespace, writing what it did to the run folder's reaper.log.

    python -m sfubench.cloud.reaper ENV_DIR RUN_FOLDER [NAMESPACE]   (stdin: the pipe)
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

DONE = b"done"
DEAF_TO = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _deaf() -> None:
    """In the child before it executes: ignored signals stay ignored across exec, so there is no
    moment in its start-up when one of them could still end it."""
    for sig in DEAF_TO:
        signal.signal(sig, signal.SIG_IGN)


class Reaper:
    """The parent's side: `release()` once its own teardown is over."""

    def __init__(self, env: Path, work: Path, namespace: str | None):
        read, self._write = os.pipe()   # both ends non-inheritable: no child of the run keeps it open
        work.mkdir(parents=True, exist_ok=True)
        log = open(work / "reaper.log", "ab")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sfubench.cloud.reaper", str(env), str(work), *([namespace] if namespace else [])],
                stdin=read, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_deaf,
                cwd=Path(__file__).resolve().parents[2])
        finally:
            os.close(read)
            log.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        """The run tore down what it made: the reaper has nothing to do."""
        os.write(self._write, DONE)
        os.close(self._write)
        self.proc.wait()

    def take_over(self) -> None:
        """The run's own teardown failed: the reaper tries again, on its own, as this process goes on."""
        os.close(self._write)


def reap(env: Path, work: Path, namespace: str | None) -> int:
    from . import terraform
    failed = 0
    tfvars = work / "terraform.tfvars.json"
    if tfvars.exists():
        hosts = terraform.Hosts(env, json.loads(tfvars.read_text()), work)
        if hosts.lock():   # the run held it until it ended: it is ours now
            try:
                hosts.destroy()
                print(f"reaper: hosts of {work.name} destroyed", flush=True)
            except Exception as e:
                print(f"reaper: hosts of {work.name} NOT destroyed: {e}", flush=True)
                failed = 1
    if namespace:
        try:
            from .kube import GridSpec, KubeGrid, render
            from .run import _kube_api
            KubeGrid(_kube_api(), namespace, GridSpec(objects=render("base"))).teardown()
            print(f"reaper: namespace {namespace} deleted", flush=True)
        except Exception as e:
            print(f"reaper: namespace {namespace} NOT deleted: {e}", flush=True)
            failed = 1
    return failed


def main() -> int:
    _deaf()
    env, work = Path(sys.argv[1]), Path(sys.argv[2])
    namespace = sys.argv[3] if len(sys.argv) > 3 else None
    if sys.stdin.buffer.read() == DONE:
        return 0
    print(f"reaper: the run ended before its teardown: destroying what it made (pid {os.getpid()})", flush=True)
    return reap(env, work, namespace)


if __name__ == "__main__":
    sys.exit(main())
