"""svcenc (synth/svcenc/svcenc.c): the clip encoded as Chrome's VP9 SVC, which ffmpeg cannot do,
built from its C source against Debian's libvpx into the cache. A build runs only when the source
or the installed libvpx changed, and only the current build is kept (gobuild.installed)."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from . import gobuild
from .config import ROOT
from .media import MediaError

SOURCE = ROOT / "synth" / "svcenc" / "svcenc.c"
NAME = "svcenc"


def source_hash() -> str:
    """What an encoding's cache key takes from the encoder: a change to the C re-encodes."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


def _pkg_config(*args: str) -> str:
    try:
        r = subprocess.run(["pkg-config", *args, "vpx"], capture_output=True, text=True)
    except FileNotFoundError:
        r = None
    if r is None or r.returncode:
        raise MediaError("libvpx's headers (libvpx-dev, found by pkg-config) are not installed, which "
                         "VP9 SVC encodes with: scripts/deps.sh apt installs them")
    return r.stdout.strip()


def binary(cache: Path) -> Path:
    """`cache`/svcenc/svcenc-<hash>, compiled unless already there; two processes build it once."""
    version = _pkg_config("--modversion")
    digest = hashlib.sha256(SOURCE.read_bytes() + b"\0" + version.encode()).hexdigest()[:16]
    out = cache / NAME / f"{NAME}-{digest}"

    def compile_to(tmp: Path) -> None:
        try:
            r = subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-o", str(tmp), str(SOURCE),
                                *_pkg_config("--cflags", "--libs").split()], capture_output=True, text=True)
        except FileNotFoundError:
            raise MediaError("no C compiler (cc) to build svcenc: scripts/deps.sh apt installs gcc") from None
        if r.returncode:
            lines = r.stderr.strip().splitlines() or ["(no output)"]
            first = next((line for line in lines if "error" in line), lines[0])
            raise MediaError(f"building {SOURCE.relative_to(ROOT)} failed: {first[:500]}")
    return gobuild.installed(out, compile_to)


def outputs(prefix: Path, layers: int) -> tuple[Path, ...]:
    """The files svcenc writes: one IVF per spatial layer, the smallest first."""
    return tuple(prefix.with_name(f"{prefix.name}-s{s}.ivf") for s in range(layers))


def encode(exe: Path, y4m: Path, prefix: Path, kbps: list[int], gop: int, fps: int) -> tuple[Path, ...]:
    """`y4m` in len(`kbps`) spatial layers, `kbps` each from the smallest: `outputs`, which appear
    complete or not at all."""
    r = subprocess.run([str(exe), "-layers", str(len(kbps)), "-kbps", ",".join(map(str, kbps)), "-gop", str(gop),
                        "-fps", str(fps), "-o", str(prefix), str(y4m)], capture_output=True, text=True)
    if r.returncode:
        raise MediaError(f"svcenc failed encoding {y4m.name}: {r.stderr.strip()[-500:]}")
    return outputs(prefix, len(kbps))
