"""Delay and playback statistics from frame codes, including the loop's wrap-around."""
import pytest

from quality import delay, framecode

LOOP, FPS = 262, 30


def test_frame_distance_wraps_around_the_loop():
    assert delay.frames_between(10, 14, LOOP) == 4
    assert delay.frames_between(259, 2, LOOP) == 5
    assert delay.frames_between(2, 259, LOOP) == -5
    assert delay.frames_between(0, LOOP // 2, LOOP) == LOOP // 2


def test_glass_to_glass_delay():
    assert delay.delay_ms(sent=20, received=14, loop=LOOP, fps=FPS) == pytest.approx(200)
    assert delay.delay_ms(sent=3, received=258, loop=LOOP, fps=FPS) == pytest.approx(7000 / 30)
    assert delay.delay_ms(sent=7, received=7, loop=LOOP, fps=FPS) == 0


def test_delay_from_decoded_frames(paper_media, vp8):
    received = vp8(paper_media, 300)
    # The receiver shows frame i - 6 while the sender's preview shows frame i.
    for i in range(20, 90, 10):
        sent = framecode.decode(paper_media.frame(i), paper_media.layout)
        got = framecode.decode(received[i - 6], paper_media.layout)
        assert delay.delay_ms(sent, got, paper_media.frames, paper_media.fps) == pytest.approx(200)


def _series(codes, fps=FPS, t0=0.0):
    return [(t0 + i / fps, c) for i, c in enumerate(codes)]


def test_smooth_playback_across_the_wrap():
    codes = [(250 + i) % LOOP for i in range(60)]
    stats = delay.playback(_series(codes), LOOP)
    assert stats.shown == 60 and stats.skipped == 0 and stats.freezes == 0 and stats.backwards == 0
    assert stats.effective_fps == pytest.approx(30)


def test_freeze_skip_and_reorder():
    # 1..10 played, 10 held for 0.6 s, then a jump to 19 (8 frames skipped), then one step back.
    codes = list(range(1, 11)) + [10] * 18 + [19, 20, 21, 20, 22]
    series = _series(codes)
    stats = delay.playback(series, LOOP)
    assert stats.freezes == 1
    assert stats.longest_freeze_s == pytest.approx(19 / 30)
    assert stats.freeze_s == stats.longest_freeze_s
    assert stats.skipped == 8 + 1  # 10 -> 19, and 20 -> 22 after the reorder
    assert stats.backwards == 1
    assert stats.shown == 15
    assert delay.is_frozen_at(series, 15) and not delay.is_frozen_at(series, 3)


def test_undecoded_samples_are_ignored_and_short_holds_are_not_freezes():
    series = [(0.0, 5), (0.1, None), (0.2, 5), (0.3, 6), (0.45, 6), (0.5, None), (0.7, 7)]
    stats = delay.playback(series, LOOP)
    assert stats.freezes == 0 and stats.shown == 3 and stats.duration == pytest.approx(0.7)
    assert not delay.is_frozen_at(series, 1)
    assert delay.playback(series, LOOP, freeze_s=0.3).freezes == 2
    assert delay.playback([], LOOP).shown == 0
