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
import sys
from pathlib import Path

from .. import reaper as reaper_mod


class Reaper(reaper_mod.Reaper):
    """The cloud run's: `release()` once its own teardown is over."""

    def __init__(self, env: Path, work: Path, namespace: str | None):
        super().__init__("sfubench.cloud.reaper", [str(env), str(work), *([namespace] if namespace else [])],
                         work / "reaper.log")


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
    env, work = Path(sys.argv[1]), Path(sys.argv[2])
    namespace = sys.argv[3] if len(sys.argv) > 3 else None
    if reaper_mod.wait_for_the_run():
        return 0
    return reap(env, work, namespace)


if __name__ == "__main__":
    sys.exit(main())
