"""Delay and playback statistics from frame codes, including the loop's wrap-around."""
import pytest

from quality import delay, framecode

LOOP, FPS = 262, 30


def test_frame_distance_wraps_around_the_loop():
    assert delay.frames_between(10, 14, LOOP) == 4
    assert delay.frames_between(259, 2, LOOP) == 5
    assert delay.frames_between(2, 259, LOOP) == -5
    assert delay.frames_between(0, LOOP // 2, LOOP) == LOOP // 2


def test_glass_to_glass_delay_matches_each_code_to_its_capture():
    sent = [(i / FPS, i % LOOP) for i in range(400)]              # captured at i / FPS
    received = [(t + 0.2, c) for t, c in sent[100:300]]           # each rendered 200 ms later
    delays = delay.delays_ms(received, sent, LOOP, FPS)
    assert len(delays) == 200 and delays == pytest.approx([200] * 200)


def test_delay_across_the_loop_takes_the_latest_capture_before_receipt():
    # Code 5 was captured at 5/30 s and again one loop later; a receipt just after the second
    # capture is matched to it, not to the first one a loop earlier.
    sent = [(i / FPS, i % LOOP) for i in range(LOOP + 20)]
    second = (LOOP + 5) / FPS
    assert delay.delays_ms([(second + 0.1, 5)], sent, LOOP, FPS) == pytest.approx([100])


def test_frames_without_a_capture_or_a_code_are_left_out():
    sent = [(i / FPS, i) for i in range(10)]
    received = [(1.0, None), (1.0, 200), (0.05, 9), (1.0, 3)]   # 9 rendered 0.25 s before its capture
    assert delay.delays_ms(received, sent, LOOP, FPS) == pytest.approx([900])
    # A render time estimated a little before the capture still matches it.
    assert delay.delays_ms([(0.29, 9)], sent, LOOP, FPS) == pytest.approx([-10])


def test_delay_from_decoded_frames(paper_media, vp8):
    lay = paper_media.layout
    received = vp8(paper_media, 300)
    sent = [(i / paper_media.fps, framecode.decode(paper_media.frame(i), lay)) for i in range(90)]
    # The receiver renders frame i at the time the sender captures frame i + 6.
    got = [((i + 6) / paper_media.fps, framecode.decode(received[i], lay)) for i in range(20, 80)]
    delays = delay.delays_ms(got, sent, paper_media.frames, paper_media.fps)
    assert len(delays) >= 58 and delays == pytest.approx([200] * len(delays))


def _series(codes, fps=FPS, t0=0.0):
    return [(t0 + i / fps, c) for i, c in enumerate(codes)]


def test_smooth_playback_across_the_wrap():
    codes = [(250 + i) % LOOP for i in range(60)]
    stats = delay.playback(_series(codes), LOOP)
    assert stats.shown == 60 and stats.skipped == 0 and stats.freezes == 0 and stats.backwards == 0
    assert stats.effective_fps == pytest.approx(30)


def test_a_stalled_stream_that_bursts_its_backlog_counts_the_frames_it_showed():
    """An overloaded SFU holds frames and delivers them at once: 4 frames within a millisecond of a
    10-s window delivered 0.4 frames a second, not thousands."""
    burst = [(5.0 + i * 0.0002, 100 + i) for i in range(4)]
    assert delay.playback(burst, LOOP, span=10.0).effective_fps == pytest.approx(0.4)
    assert delay.playback(_series(range(300)), LOOP, span=10.0).effective_fps == pytest.approx(30)


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


def test_undecoded_samples_are_ignored_and_short_holds_are_not_freezes():
    series = [(0.0, 5), (0.1, None), (0.2, 5), (0.3, 6), (0.45, 6), (0.5, None), (0.7, 7)]
    stats = delay.playback(series, LOOP)
    assert stats.freezes == 0 and stats.shown == 3 and stats.duration == pytest.approx(0.7)
    assert delay.playback(series, LOOP, freeze_s=0.3).freezes == 2
    assert delay.playback([], LOOP).shown == 0
