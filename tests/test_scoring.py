"""sfubench/scoring.py's speech scores on a run folder whose recordings are made here the way pages
make them: a sender's recording of its microphone and a receiver's of what it heard, the same speech
120 ms later through a real Opus codec (ffmpeg's libopus), with epoch times as the pages stamp them."""
import json
import wave

import numpy as np
import pytest

from quality import speech
from sfubench import media
from sfubench.scoring import score_speech

from support.opus import opus

RATE = 48_000


def write(folder, name, pcm):
    with wave.open(str(folder / name), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(RATE)
        f.writeframes((np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes())


@pytest.fixture
def run(tmp_path, paper_media):
    with wave.open(str(paper_media.wav)) as f:
        loop = np.frombuffer(f.readframes(f.getnframes()), "<i2") / 32768.0
    folder = tmp_path / "audio"
    folder.mkdir()
    start, seconds, delay = 2.0, 6.0, 0.120
    said = opus(speech.reference(loop, media.AUDIO_RATE, start, seconds, RATE))
    heard = opus(speech.reference(loop, media.AUDIO_RATE, start - delay, seconds, RATE))
    write(folder, "w3-r1u1-r1u1.wav", said)
    write(folder, "w3-r1u2-r1u1.wav", heard)
    t0 = 1_800_000_000_000.0   # both recordings began at the same epoch ms
    index = [{"t": t0, "phase": "target", "window": 3, "participants": 2, "room": 1, "user": u, "peer": "r1u1",
              "rate": RATE, "samples": len(pcm), "file": f"w3-{u}-r1u1.wav"} for u, pcm in (("r1u1", said), ("r1u2", heard))]
    (folder / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in index))
    return tmp_path


def test_what_a_browser_heard_is_scored_and_timed_against_what_its_sender_said(run, paper_media):
    assert score_speech(run, paper_media) == 1   # the sender's own recording is the timing, not a score
    (row,) = [json.loads(line) for line in (run / "speech.jsonl").read_text().splitlines()]
    assert (row["user"], row["peer"], row["window"], row["participants"]) == ("r1u2", "r1u1", 3, 2)
    assert row["visqol"] >= 4.0 and row["pesq"] > 3.0, row
    assert row["codes"] >= 1 and row["mouth_to_ear_ms"] == pytest.approx(120, abs=2), row


def test_a_run_without_recordings_scores_nothing(tmp_path, paper_media):
    assert score_speech(tmp_path, paper_media) == 0 and not (tmp_path / "speech.jsonl").exists()
