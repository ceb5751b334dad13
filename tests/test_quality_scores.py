"""BRISQUE and the full-reference scores rank real degradations the right way round."""
import cv2
import numpy as np
import pytest

from quality import brisque, fullref

NUMBERS = range(5, 262, 37)  # frames spread over the loop


def _jpeg(rgb, quality):
    ok, data = cv2.imencode(".jpg", rgb, [cv2.IMWRITE_JPEG_QUALITY, quality])
    return cv2.imdecode(data, cv2.IMREAD_UNCHANGED)


DEGRADE = {
    "blur": lambda f: cv2.GaussianBlur(f, (0, 0), 2.5),
    "downscale 4x": lambda f: cv2.resize(f, (f.shape[1] // 4, f.shape[0] // 4), interpolation=cv2.INTER_AREA),
    "jpeg q5": lambda f: _jpeg(f, 5),
}


def _brisque(frames, layout):
    return float(np.mean([brisque.score(f, layout) for f in frames]))


def _psnr(frames, media):
    return float(np.mean([fullref.compare(f, media).psnr for f in frames]))


@pytest.mark.parametrize("kind", DEGRADE)
def test_degradations_score_worse(paper_media, kind):
    clean = [paper_media.frame(n) for n in NUMBERS]
    degraded = [DEGRADE[kind](f) for f in clean]
    # BRISQUE: lower is better.
    assert _brisque(clean, paper_media.layout) + 10 < _brisque(degraded, paper_media.layout)
    # PSNR: higher is better; the clean frame is the source itself.
    assert _psnr(clean, paper_media) == fullref.MAX_PSNR
    assert _psnr(degraded, paper_media) < 35
    scores = [fullref.compare(f, paper_media) for f in degraded]
    assert [s.code for s in scores] == list(NUMBERS)
    assert all(s.ssim < 0.95 for s in scores)


def test_low_bitrate_vp8_scores_worse_than_high(paper_media, vp8):
    # Frames after the encoder's rate control has settled.
    good = list(vp8(paper_media, 1000, frames=60)[30::6])
    poor = list(vp8(paper_media, 80, frames=60)[30::6])
    assert _brisque(good, paper_media.layout) < _brisque(poor, paper_media.layout)
    assert _psnr(good, paper_media) > _psnr(poor, paper_media) + 2
    good_vmaf = fullref.vmaf_by_code(good, paper_media)
    poor_vmaf = fullref.vmaf_by_code(poor, paper_media)
    assert None not in good_vmaf + poor_vmaf
    assert np.mean(good_vmaf) > np.mean(poor_vmaf) + 10


def test_vmaf_pairs_by_code_and_skips_unreadable_frames(paper_media):
    clean = paper_media.frame(100)
    blurred = cv2.GaussianBlur(paper_media.frame(200), (0, 0), 2.5)
    black = np.zeros_like(clean)
    same, worse, none = fullref.vmaf_by_code([clean, blurred, black], paper_media)
    assert same > 90 and worse < same - 20 and none is None


def test_vmaf_at_the_received_size_scores_a_layer_against_the_source_scaled_alike(paper_media):
    """A simulcast layer's frame, scaled up to the source, pays for the detail its size lacks; at its
    own size, against the source scaled down the same way, it is that layer at its best. Frames of
    three sizes in one call: one ffmpeg run per size, each score back in its frame's place."""
    w, h = paper_media.layout.width, paper_media.layout.height
    full = paper_media.frame(60)
    half = cv2.resize(paper_media.frame(120), (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    quarter = cv2.resize(paper_media.frame(180), (w // 4, h // 4), interpolation=cv2.INTER_AREA)
    blurred_half = cv2.GaussianBlur(half, (0, 0), 2.0)
    frames = [full, half, np.zeros_like(half), quarter, blurred_half]
    tile = fullref.vmaf_by_code(frames, paper_media)
    own = fullref.vmaf_by_code(frames, paper_media, at_received_size=True)
    assert tile[2] is None and own[2] is None
    assert own[0] == pytest.approx(tile[0])              # the full picture is its own layer
    assert own[1] > 90 and own[3] > 90                   # each layer as scaled down from the source
    assert tile[1] < own[1] - 10 and tile[3] < tile[1]   # scaled up, the smaller the worse
    assert own[4] < own[1] - 20                          # a blurred layer still scores worse at its size


def test_blank_frame_has_no_brisque(paper_media):
    for rgb in (np.zeros((360, 540, 3), np.uint8), np.full((180, 270, 3), 90, np.uint8)):
        assert brisque.score(rgb) is None
        assert brisque.score(rgb, paper_media.layout) is None


def test_brisque_ignores_the_code_strip(paper_media):
    frame = paper_media.frame(50)
    with_strip = brisque.score(frame)
    picture_only = brisque.score(frame, paper_media.layout)
    assert picture_only is not None and with_strip is not None and picture_only != with_strip


def test_frames_without_a_code_are_not_paired(paper_media):
    assert fullref.compare(np.zeros((360, 540, 3), np.uint8), paper_media) is None


def test_missing_model_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(brisque, "MODEL", tmp_path / "brisque_model_live.yml")
    brisque._scorer.cache_clear()
    try:
        with pytest.raises(brisque.ModelMissing, match="opencv-data"):
            brisque.score(np.random.default_rng(0).integers(0, 255, (90, 120, 3), np.uint8))
    finally:
        brisque._scorer.cache_clear()


def test_brisque_discriminates_at_the_light_profile_size(local_media):
    # At 320 px the LIVE model clamps natural frames to 0; scoring at the study's width must not.
    clean = [local_media.frame(n) for n in NUMBERS]
    blurred = [cv2.GaussianBlur(f, (0, 0), 2) for f in clean]
    assert 10 < _brisque(clean, local_media.layout) < _brisque(blurred, local_media.layout) - 10
