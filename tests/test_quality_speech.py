"""quality/speech.py on the microphone's own speech through a real Opus codec (ffmpeg's libopus):
placed in the loop by its audio codes, scored by ViSQOL (and PESQ) against the reference, the scores
falling as packets are lost; and the mouth-to-ear delay from markers sent and heard."""
import wave

import numpy as np
import pytest

from quality import speech
from sfubench import media

from support.opus import opus

RATE = 48_000


@pytest.fixture(scope="module")
def loop(paper_media):
    with wave.open(str(paper_media.wav)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768.0


def lose(pcm, share, seed):
    """Every 20-ms frame lost with chance `share`, concealed as silence."""
    out, frame = pcm.copy(), RATE // 50
    for i in np.flatnonzero(np.random.default_rng(seed).random(len(out) // frame) < share):
        out[i * frame:(i + 1) * frame] = 0
    return out


def test_a_recording_is_placed_in_the_loop_by_its_codes(loop, paper_media):
    start = 3.1
    heard = opus(speech.reference(loop, media.AUDIO_RATE, start, 6.0, RATE))
    at = speech.place(heard, RATE, paper_media.marks, len(loop), media.AUDIO_RATE)
    assert at == pytest.approx(start, abs=0.001)
    assert speech.place(np.zeros(RATE), RATE, paper_media.marks, len(loop), media.AUDIO_RATE) is None


def test_scores_fall_as_packets_are_lost_and_the_clean_codec_scores_high(loop):
    ref48 = speech.reference(loop, media.AUDIO_RATE, 0.0, len(loop) / media.AUDIO_RATE, RATE)
    coded = opus(ref48)
    ref = speech.resample(ref48, RATE)
    scorer = speech.Scorer()
    scores = {share: scorer.score(ref, speech.resample(lose(coded, share, seed=1), RATE))
              for share in (0.0, 0.05, 0.15)}
    assert scores[0.0]["visqol"] >= 4.0, scores
    assert scores[0.0]["visqol"] > scores[0.05]["visqol"] > scores[0.15]["visqol"], scores
    assert scores[0.0]["pesq"] > scores[0.15]["pesq"], scores
    assert speech.Scorer.versions()["visqol"].startswith("visqol-python ")


def test_a_delay_is_read_from_the_latest_sending_of_the_same_marker():
    loop_s = 8.7
    sent = [(100.0, 0), (103.0, 1), (108.7, 0), (111.7, 1)]
    heard = [(100.25, 0), (103.25, 1), (108.95, 0), (114.0, 1)]   # the last 2.3 s late: past the next marker
    assert speech.delays_ms(heard, sent, loop_s) == pytest.approx([250, 250, 250, 2300])
    assert speech.delays_ms([(99.0, 0)], sent, loop_s) == []       # heard before any sending: not a delay
