"""The command-line tools of the cloud path (terraform, kustomize), found on PATH or built once
from the Go module proxy by scripts/tools.sh."""
from __future__ import annotations

import subprocess

from ..config import ROOT


class ToolError(RuntimeError):
    pass


def tool(name: str) -> str:
    """The path of `name`, building it into the cache first when it is neither there nor on PATH
    (minutes, once per version)."""
    # stderr passes through: a first build says so ("tools: building terraform ...") while it runs
    r = subprocess.run([str(ROOT / "scripts" / "tools.sh"), "--path", name], stdout=subprocess.PIPE, text=True)
    if r.returncode:
        raise ToolError(f"scripts/tools.sh could not provide {name} (its message is above)")
    return r.stdout.strip().splitlines()[-1]
