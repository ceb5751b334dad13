"""reports/audio.py: what participants hear, from received audio's playout counters; the audio knee;
the Audio section of a run's report and of a study."""
import json

import pytest

from quality import emodel
from reports import audio, catalog, knee, metrics, runfiles, windows
from reports import run as run_report
from reports import study as study_report

from support import fakerun


def audio_sample(t, *, played, concealed, buffered, packets, lost=0, discarded=0, removed=0, held=0.0, rtt=0.02,
                 window=1, participants=7, user="r1u1", peer="r1u2", client="browser"):
    return {"t": t, "phase": "ramp", "window": window, "participants": participants, "room": 1, "user": user,
            "client": client, "peer": peer, "direction": "recv", "kind": "audio", "ssrc": 7, "bytes": packets * 80,
            "packets": packets, "packetsLost": lost, "jitter": 0.002, "rtt": rtt,
            "totalSamplesReceived": played, "concealedSamples": concealed, "silentConcealedSamples": 0,
            "concealmentEvents": concealed // 960, "insertedSamplesForDeceleration": 0,
            "removedSamplesForAcceleration": removed, "jitterBufferDelay": buffered,
            "jitterBufferEmittedCount": played - concealed, "jitterBufferMinimumDelay": held,
            "packetsDiscarded": discarded}


def observation(**later):
    first = audio_sample(0, played=0, concealed=0, buffered=0.0, packets=0)
    last = audio_sample(1000, **{"played": 48_000, "concealed": 960, "buffered": 0.04 * 47_040, "packets": 49,
                                 "removed": 480, **later})
    (o,) = windows.stream_windows([first, last], kinds=("audio",))
    return o


def test_a_streams_figures_come_from_its_playout_counters_over_the_window():
    o = observation(lost=1, discarded=1, held=0.025 * 47_040)
    f = audio.stream_figures(o)
    assert f["audio_concealed_pct"] == pytest.approx(2.0)           # 960 of 48,000 samples
    assert f["audio_jb_ms"] == pytest.approx(40.0)
    assert f["audio_jb_held_ms"] == pytest.approx(25.0)             # of which lip sync held 25
    assert f["audio_loss_pct"] == pytest.approx(100 * 2 / 50)       # a lost and a late packet of 50
    # the network one way: the receiver's half of its 20-ms round trip, standing for the sender's too
    assert f["audio_delay_ms"] == pytest.approx(10 + 10 + 40)
    assert f["audio_mos"] == pytest.approx(emodel.mos(emodel.rating(emodel.for_stream(60, 4.0))))
    sent = {"rtt": [40.0]}   # the sender 40 ms from the SFU and back
    assert audio.stream_figures(o, sent)["audio_delay_ms"] == pytest.approx(20 + 10 + 40)


def test_a_sent_or_a_video_stream_has_no_playout():
    send = {**audio_sample(0, played=0, concealed=0, buffered=0, packets=0), "direction": "send"}
    video = {**audio_sample(0, played=0, concealed=0, buffered=0, packets=0), "kind": "video"}
    later = [dict(s, t=1000, packets=50, bytes=4000) for s in (send, video)]
    assert all("playout" not in o for o in windows.stream_windows([send, video, *later], kinds=None))


def test_concealment_is_pooled_over_the_samples_played_not_averaged_over_streams():
    quiet, busy = observation(concealed=0), observation(played=96_000, concealed=9_600)
    st = audio.audio_stats([quiet, busy])
    assert st["audio_concealed_pct"] == pytest.approx(100 * 9_600 / 144_000)
    assert st["audio_streams"] == 2 and st["audio_accelerated_pct"] == pytest.approx(100 * 960 / 144_000)


def test_a_counter_that_went_back_gives_nothing_rather_than_a_negative_share():
    o = observation(concealed=0)
    o["playout"]["concealedSamples"] = None   # as windows gives a counter that restarted
    assert audio.stream_figures(o)["audio_concealed_pct"] is None


def rows(**by_count):
    return [{"participants": p, **figures} for p, figures in by_count.items()]


def test_the_audio_knee_is_the_first_count_whose_mos_or_concealment_stays_bad():
    series = [{"participants": 7, "audio_mos": 4.3, "audio_concealed_pct": 0.1},
              {"participants": 14, "audio_mos": 4.2, "audio_concealed_pct": 6.0},   # once: noise
              {"participants": 21, "audio_mos": 4.1, "audio_concealed_pct": 1.0},
              {"participants": 28, "audio_mos": 3.5, "audio_concealed_pct": 2.0},
              {"participants": 35, "audio_mos": 3.1, "audio_concealed_pct": 9.0}]
    k = knee.find_knee(series, audio.AudioKneeRule())
    assert (k.participants, k.criterion, k.coped, k.of) == (28, "audio_mos", 21, "audio knee")
    assert knee.stop_reason(k).startswith("audio knee at 28 participants")
    later = [dict(r, audio_concealed_pct=6.0) if r["participants"] >= 21 else r for r in series]
    assert knee.find_knee(later, audio.AudioKneeRule()).criterion == "concealment"


def test_a_run_stopped_on_an_audio_knee_does_not_read_as_stopped_on_a_video_one():
    events = [{"event": "target_reached", "reason": "audio knee at 28 participants: ..."}]
    assert knee.as_stopped(knee.Knee(), events).stopped_on is None
    assert knee.as_stopped(knee.Knee(of="audio knee"), events).stopped_on == 28


def test_the_knee_that_ends_a_ramp_is_the_one_the_setting_names():
    video, heard = knee.Knee(35, "freezes"), knee.Knee(28, "audio_mos", of="audio knee")
    a = type("A", (), {"knee": video, "audio_knee": heard})()
    assert metrics.ending_knee(a, "video") is video
    assert metrics.ending_knee(a, "audio") is heard
    assert metrics.ending_knee(a, "both") is heard
    a.audio_knee = knee.Knee(of="audio knee")
    assert metrics.ending_knee(a, "both") is video and metrics.ending_knee(a, "audio").participants is None


@pytest.fixture(scope="module")
def degrading(tmp_path_factory):
    """A run whose SFU degrades past 21 participants, its report built."""
    path = fakerun.make_run(tmp_path_factory.mktemp("audio"), rooms=6, knee=21, seed=3)
    run_report.build(path)
    return path


def test_a_runs_report_has_an_audio_section_its_table_and_both_knees(degrading):
    a = metrics.analyse(runfiles.load(degrading))
    assert a.audio_knee.participants is not None and a.audio_knee.participants > 21
    assert a.headline["audio_knee"] == a.audio_knee.participants
    first = next(r for r in a.series if r.get("audio_mos") is not None)
    assert first["participants"] == 7 and first["audio_mos"] > 4 and first["audio_concealed_pct"] < 1, first
    page = (degrading / "report.html").read_text()
    assert "<h2>Audio</h2>" in page and f"Audio knee at {a.audio_knee.participants} participants" in page
    assert (degrading / "report-audio.png").exists()
    tables = json.loads((degrading / "tables.json").read_text())
    assert tables["audio_knee"]["participants"] == a.audio_knee.participants
    shown = tables["tables"]["audio"]
    assert shown["columns"][:2] == ["Participants", "Audio MOS (E-model)"]
    by_count = {r[0]: r for r in shown["rows"]}
    assert by_count[7][1] > by_count[max(by_count)][1]   # MOS falls as the SFU degrades
    # the recordings' scores beside the E-model, the scorers named with their versions
    visqol = shown["columns"].index("ViSQOL (MOS-LQO)")
    assert by_count[7][visqol] > by_count[max(by_count)][visqol] and "visqol-python 3.8.0" in shown["note"]
    assert a.headline["audio_visqol"] is not None and a.headline["audio_mouth_to_ear_ms"] is not None


def test_every_figure_of_the_audio_table_is_one_catalogue_entry_of_its_section():
    shown = audio.audio_table([{"participants": 7, "audio_streams": 42, "audio_mos": 4.4, "audio_jb_ms": 40.0}],
                              {"browser"})
    assert shown.keys == ["participants", "audio_mos", "audio_streams", "audio_jb_ms"]
    assert all(catalog.ENTRIES[k].section == "audio" for k in shown.keys[1:])
    assert "estimates" not in shown.note
    assert "estimates" in audio.audio_table([], {"browser", "synthetic"}).note


def test_a_study_compares_the_sfus_audio_and_keeps_both_knees(tmp_path):
    entries = []
    for sfu, at in (("janus", 21), ("inhouse", 42)):
        runs = [metrics.analyse(runfiles.load(fakerun.make_run(tmp_path / f"{sfu}{s}", sfu=sfu, rooms=9, knee=at,
                                                               seed=s))) for s in (1, 2)]
        entries.append(study_report.Entry(sfu, runs, 2))
    _, results = study_report.build(entries, tmp_path / "study")
    assert all(len(results[s]["audio_knees"]) == 2 and results[s]["audio_knee"] for s in ("janus", "inhouse"))
    assert results["inhouse"]["audio_rank"] == 1 and results["janus"]["audio_rank"] == 2
    page = (tmp_path / "study" / "report.html").read_text()
    assert "What participants heard" in page and (tmp_path / "study" / "study-audio.png").exists()
