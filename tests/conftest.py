import subprocess
from pathlib import Path

import numpy as np
import pytest


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
