"""The frame code through what a real call does to it: VP8 at low rates, downscaling, blur."""
import cv2
import numpy as np
import pytest

from quality import framecode
from quality.framecode import Layout


def test_gray_code_round_trips_and_neighbours_differ_in_one_bit():
    for n in range(1 << 16):
        assert framecode.from_gray(framecode.to_gray(n)) == n
    assert all(bin(framecode.to_gray(n) ^ framecode.to_gray(n + 1)).count("1") == 1 for n in range(999))


def test_layout_cells_fit_and_stay_macroblock_aligned():
    paper = framecode.layout_for(540, 360, 262)
    local = framecode.layout_for(320, 180, 130)
    assert (paper.cell, local.cell) == (32, 16)
    for layout in (paper, local):
        assert layout.strip_width <= layout.width and layout.band_height % 16 == 0
    assert Layout.from_dict(paper.to_dict()) == paper


def test_every_source_frame_decodes_to_its_number(paper_media, local_media):
    for media in (paper_media, local_media):
        assert [framecode.decode(media.frame(n), media.layout) for n in range(media.frames)] == list(
            range(media.frames))


def test_pictures_without_a_code_give_none(paper_media):
    layout = paper_media.layout
    frame = paper_media.frame(40)
    picture_only = cv2.resize(framecode.picture_area(frame, layout), (540, 360))
    for rgb in (np.zeros((360, 540, 3), np.uint8), np.full((360, 540, 3), 255, np.uint8), picture_only,
                np.roll(frame, layout.cell // 2, axis=1)):
        assert framecode.decode(rgb, layout) is None
    blend = ((frame.astype(np.uint16) + paper_media.frame(41)) // 2).astype(np.uint8)
    assert framecode.decode(blend, layout) in (None, 40, 41)


@pytest.mark.parametrize("size", [(405, 270), (270, 180), (180, 120), (135, 90), (600, 400)])
def test_decodes_at_any_scale(paper_media, size):
    numbers = range(0, paper_media.frames, 13)
    for n in numbers:
        scaled = cv2.resize(paper_media.frame(n), size, interpolation=cv2.INTER_AREA)
        assert framecode.decode(scaled, paper_media.layout) == n


def test_survives_blur_and_jpeg(paper_media):
    for n in range(0, paper_media.frames, 29):
        frame = paper_media.frame(n)
        ok, jpeg = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 5])
        assert framecode.decode(cv2.imdecode(jpeg, cv2.IMREAD_UNCHANGED), paper_media.layout) == n
        assert framecode.decode(cv2.GaussianBlur(frame, (0, 0), 4), paper_media.layout) == n


@pytest.mark.parametrize("profile", ["paper", "local"])
@pytest.mark.parametrize("scale", [1, 2])
@pytest.mark.parametrize("kbps", [150, 300, 1000])
def test_through_vp8_never_wrong_and_nearly_always_read(request, vp8, profile, scale, kbps):
    media = request.getfixturevalue(f"{profile}_media")
    frames = vp8(media, kbps, scale)
    assert len(frames) == 90  # one decoded frame per source frame, so index = true number
    decoded = [framecode.decode(f, media.layout) for f in frames]
    wrong = [(i, d) for i, d in enumerate(decoded) if d is not None and d != i]
    assert wrong == []
    assert sum(d is not None for d in decoded) >= 0.99 * len(frames)


def test_picture_area_leaves_out_the_band_at_any_scale(paper_media):
    layout = paper_media.layout
    frame = paper_media.frame(0)
    full = framecode.picture_area(frame, layout)
    assert full.shape == (360 - layout.picture_top, 540, 3)
    half = framecode.picture_area(cv2.resize(frame, (270, 180)), layout)
    assert half.shape[0] == 180 - layout.picture_top // 2
    # Nothing of the black band or the white cells: the top rows are footage.
    assert full[:4].std() > 10


def test_encode_refuses_frames_it_cannot_code(paper_media):
    layout = paper_media.layout
    with pytest.raises(ValueError):
        framecode.encode(np.zeros((180, 320, 3), np.uint8), 1, layout)
    with pytest.raises(ValueError):
        framecode.encode(np.zeros((360, 540, 3), np.uint8), layout.frames, layout)


@pytest.mark.parametrize("profile", ["local", "paper"])
def test_levels_the_page_sampler_reads_decode_after_vp8(request, vp8, profile):
    """The page sends the mean Y of each cell's centre (sampler.js, mirrored by tests/support/pagesampler.py);
    decode_levels must read those as decode() reads RGB, after a real VP8 round trip."""
    from support.pagesampler import levels

    media = request.getfixturevalue(f"{profile}_media")
    frames = vp8(media, 300, frames=40)
    assert len(frames) == 40
    for number, rgb in enumerate(frames):
        cells, _ = levels(rgb, media.layout)
        assert framecode.decode_levels(cells, media.layout) == number
