"""The video check on real frames from the clip: playing, blank and frozen, with and without codes."""
import subprocess

import cv2
import numpy as np
import pytest

from quality import check
from sfubench import media as media_mod


def _natural_frames(count):
    """Footage straight from the source, with no frame code, at a native size that is not 16:9."""
    raw = subprocess.run(
        ["/usr/bin/ffmpeg", "-v", "error", "-nostdin", "-i", str(media_mod._source_path()), "-frames:v",
         str(count), "-vf", "scale=480:360", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, 360, 480, 3)


def _timed(frames, fps):
    return [(i / fps, f) for i, f in enumerate(frames)]


def test_playing_clip_with_and_without_codes(paper_media):
    frames = [(t, paper_media.frame(n)) for t, n in [(0.0, 10), (0.3, 19), (0.6, 28)]]
    assert check.classify(frames) == "playing"
    assert check.classify(frames, paper_media.layout) == "playing"
    natural = _natural_frames(26)
    assert check.classify([(0.0, natural[0]), (0.5, natural[12]), (1.0, natural[25])]) == "playing"


def test_black_and_uniform_pictures_are_blank_not_frozen(paper_media):
    for level in (0, 16, 128):
        flat = np.full((360, 540, 3), level, np.uint8)
        assert check.classify([(0.0, flat), (1.0, flat.copy())]) == "blank"
        assert check.classify([(0.0, flat), (1.0, flat)], paper_media.layout) == "blank"
    # A black frame through a real codec still reads blank.
    ok, jpeg = cv2.imencode(".jpg", np.zeros((270, 480, 3), np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 20])
    black = cv2.imdecode(jpeg, cv2.IMREAD_UNCHANGED)
    assert check.classify([(0.0, black), (0.7, black)]) == "blank"


def test_picture_gone_black_is_blank(paper_media):
    black = np.zeros((360, 540, 3), np.uint8)
    assert check.classify([(0.0, paper_media.frame(3)), (0.6, black)], paper_media.layout) == "blank"


def test_frozen_natural_frame():
    still = _natural_frames(1)[0]
    assert check.classify([(0.0, still), (0.25, still.copy()), (0.6, still.copy())]) == "frozen"


def test_frozen_by_code_despite_pixel_noise(paper_media):
    frame = paper_media.frame(77)
    noisy = []
    for quality in (40, 60, 80):
        ok, jpeg = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, quality])
        noisy.append(cv2.imdecode(jpeg, cv2.IMREAD_UNCHANGED))
    frames = list(zip([0.0, 0.3, 0.6], noisy))
    assert check.classify(frames, paper_media.layout) == "frozen"


def test_freeze_must_last_half_a_second(paper_media):
    moving = [(0.0, paper_media.frame(0)), (0.4, paper_media.frame(12))]
    stuck_long = moving + [(0.9, paper_media.frame(12)), (1.0, paper_media.frame(12))]
    stuck_short = moving + [(0.6, paper_media.frame(12))]
    for layout in (None, paper_media.layout):
        assert check.classify(stuck_long, layout) == "frozen"
        assert check.classify(stuck_short, layout) == "playing"


def test_downscaled_received_video(paper_media, vp8):
    frames = vp8(paper_media, 300, scale=2)
    assert check.classify(_timed(frames[::5], 30), paper_media.layout) == "playing"
    assert check.classify([(0.0, frames[40]), (0.8, frames[40])], paper_media.layout) == "frozen"


def test_orientation_and_unordered_captures():
    natural = _natural_frames(26)
    portrait = [np.ascontiguousarray(f.transpose(1, 0, 2)) for f in natural]
    assert check.classify([(1.0, portrait[25]), (0.0, portrait[0])]) == "playing"


def test_needs_two_captures_half_a_second_apart(paper_media):
    frame = paper_media.frame(0)
    with pytest.raises(ValueError):
        check.classify([(0.0, frame)])
    with pytest.raises(ValueError):
        check.classify([(0.0, frame), (0.2, frame)])


def test_blank_frames_detected_at_native_size():
    assert check.is_blank(np.zeros((1, 1, 3), np.uint8))
    assert check.is_blank(np.zeros((0, 0, 3), np.uint8))
    assert not check.is_blank(_natural_frames(1)[0])


def test_alpha_is_ignored(paper_media):
    """KITE summed alpha with the colours, so an opaque black picture read as frozen content."""
    black = np.zeros((360, 540, 4), np.uint8)
    black[..., 3] = 255
    assert check.classify([(0.0, black), (1.0, black)], paper_media.layout) == "blank"
    rgba = [np.dstack([paper_media.frame(n), np.full((360, 540), 255, np.uint8)]) for n in (0, 20)]
    assert check.classify([(0.0, rgba[0]), (0.7, rgba[1])], paper_media.layout) == "playing"
