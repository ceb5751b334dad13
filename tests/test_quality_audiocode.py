"""quality/audiocode.py: markers placed between sentences are read back at their onsets, through a real
Opus encoder and decoder (ffmpeg's libopus) and through lost packets, and a damaged marker is left
unread, never misread."""
import numpy as np
import pytest

from quality import audiocode

from support.opus import opus

RATE = 48_000


def sentences(n=5, seconds=2.2, seed=1):
    """Stand-ins for speech: noise in syllable-like bursts, loud in the markers' band too."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 6 * np.pi * seconds, int(seconds * RATE))
    return [0.3 * rng.standard_normal(len(t)) * np.sin(t) ** 2 for _ in range(n)]


@pytest.fixture(scope="module")
def loop():
    return audiocode.place(sentences(), RATE, int(8.7 * RATE))


def test_markers_are_read_at_their_onsets_in_order(loop):
    pcm, onsets = loop
    assert len(onsets) == 3 and len(pcm) == int(8.7 * RATE)
    assert [(round(t * RATE), k) for t, k in audiocode.find(pcm, RATE)] == [(o, k) for k, o in enumerate(onsets)]


def test_markers_survive_opus_at_webrtcs_bitrate(loop):
    pcm, onsets = loop
    found = audiocode.find(opus(pcm), RATE)
    assert [k for _, k in found] == [0, 1, 2]
    assert all(abs(t - onsets[k] / RATE) < 0.0005 for t, k in found), found


def test_a_recording_that_starts_mid_loop_places_itself_in_the_loop(loop):
    pcm, onsets = loop
    start = onsets[1] - RATE   # a second before marker 1, two loops on
    recording = np.tile(pcm, 3)[start:start + 8 * RATE]
    found = audiocode.find(recording, RATE)
    assert [k for _, k in found] == [1, 2, 0]
    assert abs(found[0][0] - 1.0) < 1 / RATE


def test_lost_packets_leave_a_marker_unread_never_misread(loop):
    """Every 20-ms frame lost with a 15 % chance, then concealed as silence: whatever is read is a
    marker where it was placed; over ten such losses most markers are still read."""
    pcm, onsets = loop
    coded, frame = opus(pcm), RATE // 50
    read = 0
    for seed in range(10):
        lost = coded.copy()
        drop = np.random.default_rng(seed).random(len(lost) // frame) < 0.15
        for i in np.flatnonzero(drop):
            lost[i * frame:(i + 1) * frame] = 0
        found = audiocode.find(lost, RATE)
        assert all(abs(t - onsets[k] / RATE) < 0.001 for t, k in found), (seed, found)
        read += len(found)
    assert read >= 0.5 * 10 * len(onsets), read


def test_a_marker_number_is_checked():
    with pytest.raises(ValueError, match="0-63"):
        audiocode.marker(64, RATE)
    assert len({audiocode.symbols(k) for k in range(audiocode.NUMBERS)}) == audiocode.NUMBERS
    # any one symbol changed breaks the check
    for k in range(audiocode.NUMBERS):
        a, b, c = audiocode.symbols(k)
        assert all(audiocode.check(8 * a2 + b) != c for a2 in range(8) if a2 != a)
        assert all(audiocode.check(8 * a + b2) != c for b2 in range(8) if b2 != b)
