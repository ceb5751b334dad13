"""The project's Go helpers (synth/, netem/), built into the cache by source hash: a build runs
only when their sources or the Go toolchain changed, and only the current build is kept."""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from .config import ROOT


class GoBuildError(RuntimeError):
    pass


def build(name: str, package: Path, sources: tuple[Path, ...], cache: Path) -> Path:
    """`cache`/`name`/`name`-<hash>, built from `package` (a module folder) whose build reads
    `sources` (folders)."""
    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True)
    if go.returncode:
        raise GoBuildError(f"Go >= 1.26 is needed to build {package.relative_to(ROOT)}/ and is not on PATH")
    h = hashlib.sha256(go.stdout.encode())
    for src in sources:
        for f in sorted(src.rglob("*")):
            if f.name in ("go.mod", "go.sum") or (f.suffix == ".go" and not f.name.endswith("_test.go")):
                h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    binary = cache / name / f"{name}-{h.hexdigest()[:16]}"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(f".{binary.name}.{os.getpid()}.tmp")
    r = subprocess.run(["go", "build", "-trimpath", "-o", str(tmp), "."], cwd=package,
                       capture_output=True, text=True, env={**os.environ, "GOFLAGS": "-mod=readonly"})
    if r.returncode:
        tmp.unlink(missing_ok=True)
        raise GoBuildError(f"building {package.relative_to(ROOT)}/ failed: {r.stderr.strip()[-2000:]}")
    tmp.rename(binary)
    for old in binary.parent.glob(f"{name}-*"):
        if old != binary:
            old.unlink(missing_ok=True)
    return binary
