"""The clip as synthetic participants publish it, pre-encoded once: VP8 in IVF (frame i is loop
position i, frame code i), one file per simulcast layer, and Opus in Ogg.

Each file is cached beside the media by a hash of the media and its encoder settings, written under
a temporary name and renamed, behind a lock: two runs starting at once encode it once."""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import subprocess
from pathlib import Path

from .media import Media, MediaError, ffmpeg, tmp_path

log = logging.getLogger(__name__)

# Chrome's default bitrate cap for each picture size (what its encoder sends on an unconstrained
# link, e.g. a loopback), a keyframe every second, and Opus at 32 kbit/s in 20 ms packets, as
# Chrome sends a microphone.
ENCODE_KBPS = {"local": 600, "paper": 1700, "hd": 2000}
OPUS_KBPS = 32
# A simulcast layer's share of the full picture's bitrate, halving the picture's sides each time:
# Chrome's table for a 960x540 source (1200, 450 and 150 kbit/s; webrtc's simulcast.cc).
LAYER_SHARE = (1.0, 0.375, 0.125)
# Bump when the encoding settings below change, so cached encodings rebuild.
ENCODER = 2


@dataclasses.dataclass(frozen=True)
class Encoded:
    """`video`: one IVF per layer, smallest picture first, the full picture last."""
    video: tuple[Path, ...]
    ogg: Path
    kbps: tuple[int, ...]   # each layer's, as `video`
    keyframe_every: int     # frames, the same positions in every layer

    @property
    def full(self) -> Path:
        return self.video[-1]


def encoded(media: Media, layers: int = 1) -> Encoded:
    """`media` pre-encoded for synthetic publishers: the full picture with the audio, and below it
    `layers - 1` layers each half the last one's width and height."""
    if not 1 <= layers <= len(LAYER_SHARE):
        raise MediaError(f"{layers} layers: synthetic publishers send 1 to {len(LAYER_SHARE)}")
    gop = media.fps
    video, kbps = [], []
    for down in range(layers - 1, -1, -1):
        rate = round(ENCODE_KBPS[media.profile] * LAYER_SHARE[down])
        video.append(_encode_layer(media, down, rate, gop))
        kbps.append(rate)
    return Encoded(tuple(video), video[-1].with_suffix(".ogg"), tuple(kbps), gop)


def _encode_layer(media: Media, down: int, kbps: int, gop: int) -> Path:
    """The IVF of the layer whose sides are the source's halved `down` times (the full picture, 0,
    comes with the audio's Ogg of the same name)."""
    params = {"media": media.meta.name, "encoder": ENCODER, "kbps": kbps, "gop": gop}
    # the full picture's parameters are those from before layers existed: its cache stays valid
    params.update({"opus": OPUS_KBPS} if down == 0 else {"down": down})
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    stem = media.meta.with_name(f"{media.meta.stem}-synth-{digest}")
    ivf, ogg, done = stem.with_suffix(".ivf"), stem.with_suffix(".ogg"), stem.with_suffix(".json")
    outputs = (ivf, ogg) if down == 0 else (ivf,)
    if done.exists() and all(p.exists() for p in outputs):
        return ivf
    with open(stem.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and all(p.exists() for p in outputs):
            return ivf
        width, height = media.width >> down, media.height >> down
        log.info("media %s: encoding the clip for synthetic participants (VP8 %dx%d, %d kbit/s)",
                 media.profile, width, height, kbps)
        # Realtime libvpx as a browser runs it: no look-ahead or alternate reference frames, and no
        # dropped frames, so that frame i of the file is loop position i; keyframes every `gop`
        # frames exactly, so that every layer has them at the same positions.
        scale = [] if down == 0 else ["-vf", f"scale={width}:{height}:flags=area"]
        video = [*scale, "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", f"{kbps}k",
                 "-maxrate", f"{kbps}k", "-bufsize", f"{kbps}k", "-g", str(gop), "-keyint_min", str(gop),
                 "-auto-alt-ref", "0", "-lag-in-frames", "0", "-error-resilient", "default",
                 "-drop-threshold", "0", "-fps_mode", "passthrough", "-f", "ivf"]
        audio = ["-c:a", "libopus", "-b:a", f"{OPUS_KBPS}k", "-vbr", "off", "-frame_duration", "20", "-application",
                 "voip", "-ar", "48000", "-ac", "1", "-f", "ogg"]
        jobs = [(media.y4m, video, ivf)] + ([(media.wav, audio, ogg)] if down == 0 else [])
        for src, args, dst in jobs:
            _ffmpeg_to(src, args, dst)
        frames = ivf_frames(ivf)
        if frames != media.frames:
            raise MediaError(f"{ivf} has {frames} frames, the clip {media.frames}: frame codes would not "
                             "match loop positions")
        done.write_text(json.dumps({**params, "frames": frames}) + "\n")
    return ivf


def _ffmpeg_to(src: Path, args: list[str], dst: Path) -> None:
    tmp = tmp_path(dst)
    try:
        proc = subprocess.run([ffmpeg(), "-v", "error", "-nostdin", "-y", "-i", str(src), *args, str(tmp)],
                              capture_output=True)
        if proc.returncode != 0:
            raise MediaError(f"ffmpeg failed encoding {src}: {proc.stderr.decode(errors='replace').strip()[-500:]}")
        tmp.replace(dst)
    finally:
        tmp.unlink(missing_ok=True)


def ivf_frames(path: Path) -> int:
    """How many frames an IVF file holds (from its frame headers; the file header's count may lie)."""
    data = path.read_bytes()
    if data[:4] != b"DKIF":
        raise MediaError(f"{path} is not an IVF file")
    off, n = int.from_bytes(data[6:8], "little"), 0
    while off + 12 <= len(data):
        off += 12 + int.from_bytes(data[off:off + 4], "little")
        n += 1
    return n
