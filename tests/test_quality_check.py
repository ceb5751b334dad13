"""The video check on real frames of the clip, read as the page's sampler reads them (pagesampler):
playing, blank, frozen, stopped and missing, with and without a readable code."""
import subprocess

import cv2
import numpy as np

from support.pagesampler import levels
from quality import check, framecode
from sfubench import media as media_mod


def _natural_frames(count):
    """Footage straight from the source, with no frame code."""
    raw = subprocess.run(
        ["/usr/bin/ffmpeg", "-v", "error", "-nostdin", "-i", str(media_mod._source_path()), "-frames:v",
         str(count), "-vf", "scale=540:360", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, 360, 540, 3)


def _series(frames, layout, fps=30, t0=0.0):
    """(t, code, picture points) per frame, as the collector keeps them."""
    out = []
    for i, rgb in enumerate(frames):
        cells, picture = levels(rgb, layout)
        out.append((t0 + i / fps, framecode.decode_levels(cells, layout), picture))
    return out


def test_playing_clip_with_and_without_codes(paper_media):
    lay = paper_media.layout
    frames = _series([paper_media.frame(n) for n in range(10, 40)], lay)
    assert check.classify(frames, now=frames[-1][0] + 0.3) == "playing"
    natural = _series(_natural_frames(30), lay)
    assert all(code is None for _, code, _ in natural)
    assert check.classify(natural, now=natural[-1][0]) == "playing"


def test_black_and_uniform_pictures_are_blank_not_frozen(paper_media):
    lay = paper_media.layout
    for level in (0, 16, 128):
        flat = np.full((360, 540, 3), level, np.uint8)
        series = _series([flat] * 30, lay)
        assert check.classify(series, now=series[-1][0]) == "blank"
    # A black frame through a real codec still reads blank.
    ok, jpeg = cv2.imencode(".jpg", np.zeros((360, 540, 3), np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 20])
    black = cv2.imdecode(jpeg, cv2.IMREAD_UNCHANGED)
    series = _series([black] * 5, lay)
    assert check.classify(series, now=series[-1][0]) == "blank"


def test_picture_gone_black_is_blank(paper_media):
    lay = paper_media.layout
    black = np.zeros((360, 540, 3), np.uint8)
    series = _series([paper_media.frame(n) for n in range(20)] + [black] * 3, lay)
    assert check.classify(series, now=series[-1][0]) == "blank"


def test_frozen_by_code_despite_pixel_noise(paper_media):
    lay = paper_media.layout
    frame = paper_media.frame(77)
    noisy = []
    for quality in (40, 60, 80, 50, 70, 90):
        ok, jpeg = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, quality])
        noisy.append(cv2.imdecode(jpeg, cv2.IMREAD_UNCHANGED))
    series = _series([paper_media.frame(n) for n in range(60, 77)] + noisy * 3, lay, fps=15)
    assert check.classify(series, now=series[-1][0]) == "frozen"


def test_frozen_natural_frame_without_a_code(paper_media):
    still = _natural_frames(1)[0]
    series = _series([still] * 20, paper_media.layout)
    assert series[-1][1] is None
    assert check.classify(series, now=series[-1][0]) == "frozen"


def test_freeze_must_last_half_a_second(paper_media):
    lay = paper_media.layout
    moving = [paper_media.frame(n) for n in range(12)]
    short = _series(moving + [paper_media.frame(12)] * 12, lay)     # held 0.4 s at 30 fps
    long = _series(moving + [paper_media.frame(12)] * 18, lay)      # held 0.6 s
    assert check.classify(short, now=short[-1][0]) == "playing"
    assert check.classify(long, now=long[-1][0]) == "frozen"


def test_downscaled_received_video_through_vp8(paper_media, vp8):
    lay = paper_media.layout
    frames = vp8(paper_media, 300, scale=2)
    series = _series(frames[:40], lay)
    assert sum(code is not None for _, code, _ in series) >= 38
    assert check.classify(series, now=series[-1][0]) == "playing"
    held = _series([frames[40]] * 20, lay)
    assert check.classify(held, now=held[-1][0]) == "frozen"


def test_a_video_that_stopped_delivering_is_frozen_and_one_never_seen_is_missing(paper_media):
    series = _series([paper_media.frame(n) for n in range(30)], paper_media.layout)
    assert check.classify(series, now=series[-1][0] + 0.5) == "playing"
    assert check.classify(series, now=series[-1][0] + check.STALE_S + 0.1) == "frozen"
    assert check.classify([], now=10.0) == "missing"


def test_one_frame_is_not_yet_playing(paper_media):
    one = _series([paper_media.frame(3)], paper_media.layout)
    assert check.classify(one, now=one[0][0]) == "frozen"


def test_blank_frames_detected_at_native_size():
    assert check.is_blank(np.zeros((1, 1, 3), np.uint8))
    assert check.is_blank(np.zeros((0, 0, 3), np.uint8))
    assert not check.is_blank(_natural_frames(1)[0])
