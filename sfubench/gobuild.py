"""The project's Go helpers (synth/, netem/), built into the cache by source hash: a build runs
only when their sources or the Go toolchain changed, and only the current build is kept."""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from collections.abc import Callable
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

    def compile_to(tmp: Path) -> None:
        r = subprocess.run(["go", "build", "-trimpath", "-o", str(tmp), "."], cwd=package,
                           capture_output=True, text=True, env={**os.environ, "GOFLAGS": "-mod=readonly"})
        if r.returncode:
            raise GoBuildError(f"building {package.relative_to(ROOT)}/ failed: {r.stderr.strip()[-2000:]}")
    return installed(binary, compile_to)


def installed(binary: Path, compile_to: Callable[[Path], None]) -> Path:
    """`binary` (a path named <name>-<hash> in a folder of its own), made by `compile_to(tmp)` unless
    already there, then renamed into place; the folder's other builds are removed. Two processes
    build it once."""
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    name = binary.name.rsplit("-", 1)[0]
    with open(binary.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        tmp = binary.with_name(f".{binary.name}.{os.getpid()}.tmp")
        try:
            compile_to(tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.rename(binary)
        for old in binary.parent.glob(f"{name}-*"):
            if old != binary:
                old.unlink(missing_ok=True)
    return binary
