import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.tiers import BESIDE, PARTS


def pytest_collection_modifyitems(items):
    """Each test is marked with its module's part of `make test-all` and, where its module may run
    beside others, `beside` (tiers.py): the Makefile's targets select by them."""
    for item in items:
        for part, modules in PARTS.items():
            if item.path.stem in modules:
                item.add_marker(part)
        if item.path.stem in BESIDE:
            item.add_marker("beside")


@pytest.fixture(scope="session")
def media_cache() -> Path:
    """The shared build cache: media built once serve every test and every later run."""
    from sfubench.config import cache_root

    return cache_root()


# sfubench.media is imported inside the fixtures so that suites not using media never load OpenCV.
@pytest.fixture(scope="session")
def paper_media(media_cache):
    from sfubench import media

    return media.build("paper", media_cache)


@pytest.fixture(scope="session")
def local_media(media_cache):
    from sfubench import media

    return media.build("local", media_cache)


@pytest.fixture(scope="session")
def vp8(tmp_path_factory):
    """vp8(media, kbps, scale=1, frames=90) -> the first `frames` frames of the clip after a real-time
    libvpx encode (as a browser sends it) at `kbps`, scaled by 1/scale, decoded back to RGB."""
    folder = tmp_path_factory.mktemp("vp8")
    done = {}

    def encode(media, kbps, scale=1, frames=90):
        key = (media.y4m, kbps, scale, frames)
        if key not in done:
            w, h = media.width // scale, media.height // scale
            ivf = folder / f"{media.profile}-{kbps}-{scale}-{frames}.ivf"
            subprocess.run(
                ["/usr/bin/ffmpeg", "-v", "error", "-nostdin", "-y", "-i", str(media.y4m),
                 "-frames:v", str(frames), "-vf", f"scale={w}:{h}", "-c:v", "libvpx",
                 "-deadline", "realtime", "-cpu-used", "8", "-b:v", f"{kbps}k", "-threads", "1",
                 str(ivf)], check=True)
            raw = subprocess.run(
                ["/usr/bin/ffmpeg", "-v", "error", "-nostdin", "-i", str(ivf), "-f", "rawvideo",
                 "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
            done[key] = np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)
        return done[key]

    return encode


@pytest.fixture(scope="session")
def junit_schema(media_cache):
    """The JUnit XML schema CI servers read (Jenkins' junit-10.xsd), as pytest's source distribution
    on PyPI ships it for its own tests: fetched once with pip into the cache, then read from there."""
    import sys
    import tarfile

    import pytest as pytest_module
    import xmlschema

    folder = media_cache / "junit-xsd" / pytest_module.__version__
    xsd = folder / "junit-10.xsd"
    if not xsd.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"pytest=={pytest_module.__version__}", "-d", str(folder)], check=True, timeout=300)
        (sdist,) = folder.glob("pytest-*.tar.gz")
        with tarfile.open(sdist) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/junit-10.xsd"))
            xsd.with_suffix(".partial").write_bytes(tar.extractfile(member).read())
        xsd.with_suffix(".partial").rename(xsd)
        sdist.unlink()
    return xmlschema.XMLSchema(str(xsd))
