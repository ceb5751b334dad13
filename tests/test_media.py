"""The fake camera and microphone files: geometry, seamless loop, audio, caching and the CLI."""
import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from quality import audiocode, framecode
from sfubench import config, media

ROOT = Path(__file__).resolve().parents[1]


def test_profiles_build_the_sizes_asked_for(paper_media, local_media):
    for m, (w, h, fps) in ((paper_media, (540, 360, 30)), (local_media, (320, 180, 15))):
        assert (m.width, m.height, m.fps) == (w, h, fps)
        header = m.y4m.open("rb").readline().split()
        assert header[:4] == [b"YUV4MPEG2", f"W{w}".encode(), f"H{h}".encode(), f"F{fps}:1".encode()]
        assert b"C420jpeg" in header
        frame_bytes = len(b"FRAME\n") + w * h * 3 // 2
        assert m.y4m.stat().st_size == len(b" ".join(header)) + 1 + m.frames * frame_bytes
        assert 8 <= m.duration <= 12
        assert m.frame(0).shape == (h, w, 3)


def test_metadata_next_to_the_video(paper_media):
    meta = json.loads(paper_media.meta.read_text())
    assert paper_media.meta.parent == paper_media.y4m.parent
    assert framecode.Layout.from_dict(meta["layout"]) == paper_media.layout
    assert meta["frames"] == paper_media.frames == paper_media.layout.frames
    assert (meta["width"], meta["height"], meta["fps"]) == (540, 360, 30)


def test_code_levels_are_studio_black_and_white(paper_media):
    with paper_media.y4m.open("rb") as f:
        f.readline()
        f.read(len(b"FRAME\n"))
        luma = np.frombuffer(f.read(540 * 360), np.uint8).reshape(360, 540)
    cell = paper_media.layout.cell
    assert set(np.unique(luma[:cell, :cell])) == {16}
    assert set(np.unique(luma[:cell, cell:2 * cell])) == {235}


def test_loop_has_no_jump_cut(paper_media):
    picture = [framecode.picture_area(paper_media.frame(n), paper_media.layout)[::2, ::2, 1].astype(np.int16)
               for n in range(paper_media.frames)]
    steps = [np.abs(picture[(n + 1) % len(picture)] - picture[n]).mean() for n in range(len(picture))]
    wrap = steps[-1]
    assert wrap <= np.percentile(steps, 90)
    # Frames numbered by their loop position, and printed digits change with them.
    assert not np.array_equal(paper_media.frame(1)[:, -60:], paper_media.frame(2)[:, -60:])


def test_the_microphone_speaks_with_an_audio_code_after_each_sentence(paper_media, local_media):
    """espeak-ng's sentences fill the loop, each followed by its audio code, read back where the
    media's metadata says it is; a loop as long as the video's, quiet at its ends (seamless)."""
    for m in (paper_media, local_media):
        with wave.open(str(m.wav)) as w:
            assert (w.getframerate(), w.getsampwidth()) == (media.AUDIO_RATE, 2)
            assert w.getnframes() / w.getframerate() == pytest.approx(m.duration, abs=1e-3)
            pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768.0
        found = audiocode.find(pcm, media.AUDIO_RATE)
        assert [(round(t * media.AUDIO_RATE), k) for t, k in found] == [(o, k) for k, o in enumerate(m.marks)]
        assert len(m.marks) >= 2   # a few seconds' recording holds one
        # speech before each code: a second of it is loud
        voice = pcm[m.marks[0] - media.AUDIO_RATE:m.marks[0] - media.AUDIO_RATE // 4]
        assert np.sqrt(np.mean(voice ** 2)) > 0.02
        assert abs(pcm[0]) < 0.01 and abs(pcm[-1]) < 0.01


def test_cached_builds_are_reused_and_parameter_changes_rebuild(tmp_path, monkeypatch):
    first = media.build("local", tmp_path)
    stamp = first.y4m.stat().st_mtime_ns
    again = media.build("local", tmp_path)
    assert again == first and first.y4m.stat().st_mtime_ns == stamp

    monkeypatch.setitem(media.PROFILES, "local", {"width": 320, "height": 180, "fps": 12})
    changed = media.build("local", tmp_path)
    assert changed.y4m != first.y4m and changed.fps == 12
    assert first.y4m.stat().st_mtime_ns == stamp

    # A damaged file (as a crash mid-copy could leave) is rebuilt, and no temporary files remain.
    with changed.y4m.open("r+b") as f:
        f.truncate(1000)
    assert media.build("local", tmp_path).y4m.stat().st_size == changed.y4m.stat().st_size > 1000
    assert not [p for p in (tmp_path / "media").iterdir() if p.name.endswith(".tmp")]


def test_cli_prints_the_paths(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "sfubench.media", "--profile", "local", "--cache",
                          str(tmp_path)], capture_output=True, text=True, env=env, check=True)
    paths = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert set(paths) == {"y4m", "wav", "meta"}
    assert all(Path(p).is_file() for p in paths.values())


def test_missing_ffmpeg_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(media, "FFMPEG", str(tmp_path / "no-ffmpeg"))
    assert media.main(["--profile", "local", "--cache", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "apt-get install ffmpeg" in err[0]


def test_unknown_profile_is_refused(tmp_path):
    with pytest.raises(media.MediaError, match="paper"):
        media.build("huge", tmp_path)


def test_a_host_checks_its_media_against_the_runners_digest(local_media):
    """`sfubench media --expect-digest`, as a grid node's init container runs it: the same bytes
    pass; others fail in one line, so the node never serves frames the runner would misjudge."""
    cache = local_media.y4m.parent.parent

    def media_cli(*args):
        return subprocess.run([sys.executable, "-m", "sfubench.cli", "media", "--cache", str(cache), *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
    digest = local_media.digest()
    assert len(digest) == 64 and digest == media.build("local", cache).digest()
    assert media_cli("--media", "local", "--expect-digest", digest).returncode == 0
    r = media_cli("--media", "local", "--expect-digest", "0" * 64)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "are not the runner's" in r.stderr, r.stderr
    r = media_cli("--expect-digest", digest)
    assert r.returncode == 2 and "--expect-digest needs --media" in r.stderr


@pytest.mark.parametrize("codec", config.SYNTHETIC_CODECS)
def test_synthetic_layers_are_the_clip_at_halved_sizes_with_keyframes_together(local_media, codec):
    """The synthetic publishers' simulcast layers in each codec (real ffmpeg): each the whole loop,
    each side halved per layer, keyframes at the same positions in every layer (a keyframe asked for
    comes in all at once), bitrates in Chrome's proportions; the full layer is the one-layer
    encoding's file, and the audio the same in every codec."""
    from sfubench import encoding
    one = encoding.encoded(local_media, 1, codec)
    three = encoding.encoded(local_media, 3, codec)
    assert three.full == one.full and three.ogg == one.ogg == encoding.encoded(local_media).ogg
    assert len(three.video) == 3 and all(p.suffix == encoding.VIDEO[codec][0] for p in three.video)
    assert three.kbps == (75, 225, 600) and three.keyframe_every == local_media.fps
    keyframes = []
    sizes = ((80, 45), (160, 90), (320, 180)) if codec == "vp8" else ((80, 44), (160, 90), (320, 180))
    for path, (w, h) in zip(three.video, sizes):
        assert encoding.video_frames(path) == local_media.frames
        probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries",
                                "stream=width,height:frame=key_frame", "-of", "json", str(path)],
                               capture_output=True, text=True, check=True)
        info = json.loads(probe.stdout)
        assert (info["streams"][0]["width"], info["streams"][0]["height"]) == (w, h)
        keyframes.append([i for i, f in enumerate(info["frames"]) if f["key_frame"]])
    assert keyframes[0] == keyframes[1] == keyframes[2] == list(range(0, local_media.frames, local_media.fps))
    with pytest.raises(media.MediaError, match="1 to 3"):
        encoding.encoded(local_media, 4)
