"""The clip as synthetic participants publish it, pre-encoded once: video in the run's codec (VP8,
VP9 and AV1 in IVF, H.264 as an Annex B stream; frame i is loop position i, frame code i), one file
per simulcast layer, or per spatial layer of one VP9 SVC stream (svcenc.py), and Opus in Ogg.

Each file is cached beside the media by a hash of the media and its encoder settings, written under
a temporary name and renamed, behind a lock: two runs starting at once encode it once."""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import re
import subprocess
from pathlib import Path

from . import svcenc
from .config import SYNTHETIC_CODECS
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
# Spatial layers of one stream are VP9's alone here (svcenc's L2T3_KEY and L3T3_KEY).
SVC_CODEC = "vp9"
# Each codec's file and encoder, as a browser's realtime encoder runs: no look-ahead, no reordered
# or alternate reference frames, and no dropped frames, so that frame i of the file is loop position
# i; keyframes every `gop` frames exactly, so that every layer has them at the same positions.
VIDEO = {
    "vp8": (".ivf", ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-auto-alt-ref", "0",
                     "-lag-in-frames", "0", "-error-resilient", "default", "-drop-threshold", "0", "-f", "ivf"]),
    # constrained baseline as Chrome's H.264 (profile-level-id 42e01f); a delimiter before each frame
    # tells frames apart in the stream, and x264's own SEI (its settings) is no browser's
    "h264": (".h264", ["-c:v", "libx264", "-profile:v", "baseline", "-pix_fmt", "yuv420p", "-tune", "zerolatency",
                       "-bf", "0", "-sc_threshold", "0",
                       "-bsf:v", "h264_metadata=aud=insert,filter_units=remove_types=6", "-f", "h264"]),
    # profile 0 (profile-id=0), one frame per file frame: no superframes of hidden frames
    "vp9": (".ivf", ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "1",
                     "-auto-alt-ref", "0", "-lag-in-frames", "0", "-drop-threshold", "0", "-pix_fmt", "yuv420p",
                     "-f", "ivf"]),
    # main profile, libaom's realtime mode as Chrome runs it
    "av1": (".ivf", ["-c:v", "libaom-av1", "-usage", "realtime", "-cpu-used", "8", "-row-mt", "1",
                     "-lag-in-frames", "0", "-pix_fmt", "yuv420p", "-f", "ivf"]),
}


@dataclasses.dataclass(frozen=True)
class Encoded:
    """`video`: one file per layer, smallest picture first, the full picture last. With `svc` they
    are the spatial layers of one VP9 SVC stream, frame i of each a layer of picture i, the upper
    ones predicted from the base on key pictures: sent together, not as simulcast streams."""
    video: tuple[Path, ...]
    ogg: Path
    kbps: tuple[int, ...]   # each layer's, as `video`
    keyframe_every: int     # frames, the same positions in every layer
    svc: bool = False

    @property
    def full(self) -> Path:
        return self.video[-1]


def encoded(media: Media, layers: int = 1, codec: str = SYNTHETIC_CODECS[0], svc: bool = False) -> Encoded:
    """`media` pre-encoded for synthetic publishers in `codec`: the full picture with the audio, and
    below it `layers - 1` layers each half the last one's width and height; with `svc`, those
    layers as one VP9 SVC stream's spatial layers."""
    if not 1 <= layers <= len(LAYER_SHARE):
        raise MediaError(f"{layers} layers: synthetic publishers send 1 to {len(LAYER_SHARE)}")
    if svc and (codec != SVC_CODEC or layers < 2):
        raise MediaError(f"SVC in {codec.upper()} with {layers} layers: synthetic publishers send SVC in "
                         f"{SVC_CODEC.upper()} only, of 2 to {len(LAYER_SHARE)} spatial layers")
    gop = media.fps
    downs = range(layers - 1, -1, -1)
    kbps = [round(ENCODE_KBPS[media.profile] * LAYER_SHARE[down]) for down in downs]
    if svc:
        video = list(_encode_svc(media, kbps, gop))
    else:
        video = [_encode_layer(media, codec, down, rate, gop) for down, rate in zip(downs, kbps)]
    # the audio is encoded with VP8's full picture (its cache key from before codecs), in every codec
    vp8 = video[-1] if codec == SYNTHETIC_CODECS[0] else _encode_layer(media, SYNTHETIC_CODECS[0], 0, kbps[-1], gop)
    return Encoded(tuple(video), vp8.with_suffix(".ogg"), tuple(kbps), gop, svc)


def _encode_layer(media: Media, codec: str, down: int, kbps: int, gop: int) -> Path:
    """The video file of the layer whose sides are the source's halved `down` times (VP8's full
    picture, 0, comes with the audio's Ogg of the same name)."""
    params = {"media": media.meta.name, "encoder": ENCODER, "kbps": kbps, "gop": gop}
    # VP8's full picture keeps the parameters from before layers and codecs: its cache stays valid
    with_audio = down == 0 and codec == SYNTHETIC_CODECS[0]
    params.update({"opus": OPUS_KBPS} if with_audio else {"down": down})
    if codec != SYNTHETIC_CODECS[0]:
        params["codec"] = codec
    suffix, encoder = VIDEO[codec]

    def files(stem: Path) -> tuple[Path, ...]:
        return (stem.with_suffix(suffix), stem.with_suffix(".ogg")) if with_audio else (stem.with_suffix(suffix),)

    def encode(_stem: Path, outputs: tuple[Path, ...]) -> tuple[Path, ...]:
        out = outputs[0]
        width, height = media.width >> down, media.height >> down
        if codec != SYNTHETIC_CODECS[0]:   # x264's 4:2:0 takes even sides only; VP9's and AV1's follow it
            width, height = width & ~1, height & ~1
        log.info("media %s: encoding the clip for synthetic participants (%s %dx%d, %d kbit/s)",
                 media.profile, codec.upper(), width, height, kbps)
        full = (width, height) == (media.width, media.height)
        scale = [] if full else ["-vf", f"scale={width}:{height}:flags=area"]
        rate = ["-b:v", f"{kbps}k", "-maxrate", f"{kbps}k", "-bufsize", f"{kbps}k", "-g", str(gop),
                "-keyint_min", str(gop), "-fps_mode", "passthrough"]
        _ffmpeg_to(media.y4m, [*scale, *rate, *encoder], out)
        if with_audio:
            _ffmpeg_to(media.wav, ["-c:a", "libopus", "-b:a", f"{OPUS_KBPS}k", "-vbr", "off", "-frame_duration",
                                   "20", "-application", "voip", "-ar", "48000", "-ac", "1", "-f", "ogg"], outputs[1])
        return (out,)
    return _cached(media, "synth", params, files, encode)[0]


def _encode_svc(media: Media, kbps: list[int], gop: int) -> tuple[Path, ...]:
    """The spatial layers' files of the clip's VP9 SVC encoding, `kbps` each from the smallest."""
    params = {"media": media.meta.name, "encoder": ENCODER, "kbps": kbps, "gop": gop, "svc": len(kbps),
              "svcenc": svcenc.source_hash()}

    def encode(stem: Path, _outputs: tuple[Path, ...]) -> tuple[Path, ...]:
        log.info("media %s: encoding the clip for synthetic participants (VP9 SVC, %d spatial layers, %s kbit/s)",
                 media.profile, len(kbps), "/".join(map(str, kbps)))
        # the media lives in <cache>/media/: svcenc's build goes beside it, in <cache>/svcenc/
        return svcenc.encode(svcenc.binary(media.meta.parent.parent), media.y4m, stem, kbps, gop, media.fps)
    return _cached(media, "svc", params, lambda stem: svcenc.outputs(stem, len(kbps)), encode)


def _cached(media: Media, kind: str, params: dict, files, encode) -> tuple[Path, ...]:
    """`files(stem)` of the clip's encoding named by a hash of `params`, made by `encode(stem, files)`
    (which returns the video files among them) unless a finished encoding is cached: behind a lock,
    so that two runs starting at once encode it once, and each video file checked to hold the clip's
    frames, so that frame codes match loop positions."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    stem = media.meta.with_name(f"{media.meta.stem}-{kind}-{digest}")
    outputs, done = files(stem), stem.with_suffix(".json")
    if done.exists() and all(p.exists() for p in outputs):
        return outputs
    with open(stem.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and all(p.exists() for p in outputs):
            return outputs
        for out in encode(stem, outputs):
            if (frames := video_frames(out)) != media.frames:
                raise MediaError(f"{out} has {frames} frames, the clip {media.frames}: frame codes would not "
                                 "match loop positions")
        done.write_text(json.dumps({**params, "frames": media.frames}) + "\n")
    return outputs


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


_DELIMITER = re.compile(rb"\x00\x00\x01[\x09\x29\x49\x69]")   # an H.264 access unit delimiter


def video_frames(path: Path) -> int:
    """How many frames a clip file holds: an IVF's by its frame headers (the file header's count may
    lie; an AV1 file's frame is a temporal unit), an H.264 stream's by its access unit delimiters."""
    data = path.read_bytes()
    if path.suffix == ".h264":
        return len(_DELIMITER.findall(data))
    if data[:4] != b"DKIF":
        raise MediaError(f"{path} is not an IVF file")
    off, n = int.from_bytes(data[6:8], "little"), 0
    while off + 12 <= len(data):
        off += 12 + int.from_bytes(data[off:off + 4], "little")
        n += 1
    return n
