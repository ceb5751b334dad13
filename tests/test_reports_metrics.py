import json

import pytest

from reports import cost, metrics, runfiles, samples, series, stats, tables, windows

from support import fakerun
from support.fakerun.model import SEND_CAP_BPS


def sample(t, bytes_, *, phase="ramp", window="w1", user="1-1", peer=None, direction="send", kind="video",
           ssrc=1, participants=7, **extra):
    return {"t": t, "phase": phase, "window": window, "participants": participants, "room": 1, "user": user,
            "peer": peer, "direction": direction, "kind": kind, "ssrc": ssrc, "bytes": bytes_, **extra}


def one(obs, **match):
    found = [o for o in obs if all(o[k] == v for k, v in match.items())]
    assert len(found) == 1, found
    return found[0]


# ---------------------------------------------------------------- bitrate maths

def test_bitrate_is_delta_bytes_times_8000_over_delta_ms():
    assert windows.bitrate({"t": 1000, "bytes": 0}, {"t": 3000, "bytes": 250_000}) == 1_000_000
    assert windows.bitrate({"t": 0, "bytes": 1000}, {"t": 500, "bytes": 1000}) == 0


@pytest.mark.parametrize("first,last", [
    ({"t": 1000, "bytes": 0}, {"t": 1000, "bytes": 10}),      # no time passed
    ({"t": 1000, "bytes": 500}, {"t": 2000, "bytes": 10}),    # counter restarted
    ({"t": 1000}, {"t": 2000, "bytes": 10}),                  # not measured
    ({"t": 1000, "bytes": None}, {"t": 2000, "bytes": 10}),
])
def test_bitrate_unknown(first, last):
    assert windows.bitrate(first, last) is None


def test_window_uses_its_first_and_last_samples_only():
    obs = windows.stream_windows([sample(0, 0), sample(1000, 999_999), sample(2000, 250_000)])
    assert one(obs, window="w1")["bps"] == 1_000_000
    assert one(obs, window="w1")["dt"] == 2.0


def test_streams_and_windows_are_kept_apart():
    obs = windows.stream_windows([
        sample(0, 0), sample(1000, 125_000),                                   # w1, send: 1 Mbps
        sample(0, 0, direction="recv", peer="1-2"), sample(1000, 62_500, direction="recv", peer="1-2"),
        sample(5000, 1_000_000, window="w2"), sample(7000, 1_500_000, window="w2"),   # w2: 2 Mbps
        sample(0, 0, ssrc=2), sample(2000, 25_000, ssrc=2),                    # another ssrc: 100 kbps
    ])
    assert one(obs, window="w1", direction="send", bps=1_000_000)
    assert one(obs, direction="recv")["bps"] == 500_000
    assert one(obs, window="w2")["bps"] == 2_000_000
    assert sorted(o["bps"] for o in obs) == [100_000, 500_000, 1_000_000, 2_000_000]


def test_background_bitrate_comes_from_consecutive_background_samples():
    obs = windows.stream_windows([
        sample(0, 0, phase="background", window="bg-1"),
        sample(1000, 125_000, phase="background", window="bg-2"),
        sample(1500, 999_999, phase="ramp", window="r1"),       # another phase does not interleave
        sample(3000, 375_000, phase="background", window="bg-3"),
    ])
    bg = {o["window"]: o for o in obs if o["phase"] == "background"}
    assert bg["bg-1"]["bps"] is None
    assert bg["bg-2"]["bps"] == 1_000_000
    assert bg["bg-3"]["bps"] == 1_000_000
    assert bg["bg-3"]["dt"] == 2.0


def test_loss_jitter_rtt_fps_and_freezes_per_window():
    obs = windows.stream_windows([
        sample(0, 0, direction="recv", peer="1-2", packets=100, packetsLost=0, jitter=0.002, rtt=0.010,
               framesPerSecond=30, freezeCount=1),
        sample(2000, 1, direction="recv", peer="1-2", packets=290, packetsLost=10, jitter=0.004, rtt=0.030,
               framesPerSecond=20, freezeCount=3),
        sample(0, 0, packets=100, packetsLost=0), sample(2000, 1, packets=300, packetsLost=10),
    ])
    recv, send = one(obs, direction="recv"), one(obs, direction="send")
    assert (recv["lost"], recv["expected"]) == (10, 200)    # received 190 + lost 10
    assert (send["lost"], send["expected"]) == (10, 200)    # sent 200, of which 10 reported lost
    assert recv["jitter_ms"] == pytest.approx(3.0)
    assert recv["rtt"] == pytest.approx([10.0, 30.0])
    assert recv["fps"] == 25
    assert recv["freezes"] == 2


def test_audio_is_left_out_unless_asked_for():
    samples = [sample(0, 0, kind="audio"), sample(1000, 4000, kind="audio")]
    assert windows.stream_windows(samples) == []
    assert one(windows.stream_windows(samples, kinds=None), kind="audio")["bps"] == 32_000


def test_freezes_are_pooled_over_every_window_at_a_count():
    recv = {"direction": "recv", "peer": "1-2"}
    obs = windows.stream_windows([
        sample(0, 0, freezeCount=0, **recv), sample(1000, 1, freezeCount=0, **recv),
        sample(0, 0, phase="background", window="bg-1", freezeCount=0, **recv),
        sample(30_000, 1, phase="background", window="bg-2", freezeCount=1, **recv),
        sample(60_000, 2, phase="background", window="bg-3", freezeCount=1, participants=14, **recv),
    ])
    # 14 participants were only seen by a background tick: not a point of the series
    assert series.freeze_series(windows.window_totals(obs)) == [{"participants": 7,
                                                                  "freezes_per_min": pytest.approx(60 / 31)}]


# ---------------------------------------------------------------- statistics

def test_describe_min_of_positive_max_avg_and_share_above():
    d = stats.describe([0, 500_000, 2_000_000, 1_000_000, None], threshold=1_000_000)
    assert d == {"n": 4, "min": 500_000, "max": 2_000_000, "avg": 875_000, "above": 0.25}


def test_describe_without_positive_values_or_values():
    assert stats.describe([0, 0], threshold=1)["min"] is None
    assert stats.describe([0, 0], threshold=1)["above"] == 0
    assert stats.describe([]) == {"n": 0, "min": None, "max": None, "avg": None, "above": None}


def test_percentile_interpolates():
    assert stats.percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)
    assert stats.percentile([7], 10) == 7
    assert stats.percentile([], 50) is None


def test_study_tables_hand_computed():
    samples = [
        sample(0, 0, user="1-1", rtt=0.010), sample(1000, 250_000, user="1-1", rtt=0.060),     # 2 Mbps
        sample(0, 0, user="1-2", rtt=0.020), sample(1000, 62_500, user="1-2", rtt=0.100),      # 0.5 Mbps
        sample(0, 0, user="1-3"), sample(1000, 0, user="1-3"),                                  # 0
        sample(0, 0, user="1-1", peer="1-2", direction="recv"),
        sample(1000, 200_000, user="1-1", peer="1-2", direction="recv"),                        # 1.6 Mbps
        sample(0, 0, phase="target", window="t", user="1-1"),
        sample(1000, 100_000, phase="target", window="t", user="1-1"),                          # 0.8 Mbps
    ]
    t4, t5, t6 = tables.study_tables(windows.stream_windows(samples))
    cols = t4.columns
    bitrate, rtt = (dict(zip(cols, row)) for row in t4.rows)
    assert bitrate == {"Metric": "Video bitrate sent, per stream", "Unit": "Mbps", "n": 3, "Min (of > 0)": 0.5,
                       "Max": 2.0, "Avg": 0.833, "Threshold": "> 1 Mbps", "Share above (%)": 33.3}
    assert (rtt["n"], rtt["Min (of > 0)"], rtt["Max"], rtt["Avg"], rtt["Share above (%)"]) == (4, 10, 100, 47.5, 50)
    assert dict(zip(cols, t5.rows[0]))["Avg"] == 1.6
    assert dict(zip(cols, t5.rows[0]))["Share above (%)"] == 100
    assert dict(zip(cols, t6.rows[0]))["Avg"] == 0.8
    assert t6.row_keys == tables.SENDER_KEYS + tables.RECEIVER_KEYS


def test_stream_stats_per_participant_totals_and_pooled_loss():
    samples = []
    for user in ("1-1", "1-2"):
        for peer, nbytes in (("a", 125_000), ("b", 250_000)):
            samples += [sample(0, 0, user=user, peer=peer, direction="recv", packets=0, packetsLost=0),
                        sample(1000, nbytes, user=user, peer=peer, direction="recv", packets=90, packetsLost=10)]
    figures = stats.stream_stats(windows.stream_windows(samples))
    assert figures["recv_bps"] == 1_500_000
    assert figures["recv_total_bps"] == 3_000_000
    assert figures["loss_pct"] == pytest.approx(10.0)
    assert "send_bps" not in figures


def test_participants_at_follows_the_events_step():
    tl = series.timeline([{"t": 0, "event": "run_started", "participants": 0},
                           {"t": 100, "event": "room_started", "participants": 7},
                           {"t": 200, "event": "room_started", "participants": 14}])
    assert [series.participants_at(tl, t) for t in (-1, 0, 99, 100, 150, 200, 10_000)] == [0, 0, 0, 7, 7, 14, 14]


def test_check_series_counts_a_room_at_its_validation_load():
    events = [{"t": 0, "event": "room_started", "room": 1, "participants": 0},
              {"t": 5, "event": "participant_started", "room": 1, "participants": 3},
              {"t": 50, "event": "room_validated", "room": 1, "participants": 7},
              {"t": 100, "event": "room_started", "room": 2, "participants": 7},
              {"t": 105, "event": "participant_started", "room": 2, "participants": 14}]
    checks = [{"t": 10, "room": 1, "ok": True, "verdict": "playing"},        # ran at 3 started, counts at 7
              {"t": 20, "room": 1, "ok": False, "verdict": "frozen"},
              {"t": 110, "room": 2, "ok": True, "verdict": "playing"},       # room 2 never validated
              {"t": 120, "room": 2, "ok": True, "verdict": "playing"}]
    assert series.check_series(checks, events) == [{"participants": 7, "checks": 2, "check_pass_rate": 0.5},
                                                    {"participants": 14, "checks": 2, "check_pass_rate": 1.0}]


def test_room_checks():
    checks = [{"t": 10, "room": 1, "ok": True, "verdict": "playing"},
              {"t": 20, "room": 1, "ok": False, "verdict": "frozen"},
              {"t": 110, "room": 2, "ok": True, "verdict": "playing"}]
    rooms = series.room_checks(checks)
    assert rooms[0] == {"room": 1, "checks": 2, "passed": 1, "pass_rate": 0.5,
                        "verdicts": {"playing": 1, "frozen": 1}}
    assert tables.rooms_table(rooms).rows[0] == [1, 2, 1, 50.0, "1 playing, 1 frozen"]


def test_quality_series():
    q = [{"participants": 7, "brisque": 20, "vmaf": None, "frozen": False},
         {"participants": 7, "brisque": 30, "vmaf": None, "frozen": True},
         {"participants": 7, "brisque": None, "vmaf": None, "frozen": False}]
    (row,) = series.quality_series(q)
    assert row["brisque"] == 25 and "vmaf" not in row
    assert row["frozen_share"] == pytest.approx(1 / 3)


def test_playback_series_pools_every_video_of_a_count():
    common = {"participants": 7, "duration": 10.0, "skipped": 0, "freezes": 0}
    rows = [dict(common, effective_fps=15.0, delay_ms=100, delay_ms_p90=150),
            dict(common, effective_fps=13.0, delay_ms=300, delay_ms_p90=400, freezes=1),
            dict(common, effective_fps=14.0, delay_ms=200, delay_ms_p90=250),
            dict(common, participants=14, effective_fps=5.0, delay_ms=None, delay_ms_p90=None)]
    seven, fourteen = series.playback_series(rows)
    assert seven["code_fps"] == pytest.approx(14) and seven["delay_ms"] == 200
    assert seven["delay_ms_p90"] == pytest.approx(370)
    assert seven["code_freezes_per_min"] == pytest.approx(2.0)
    assert fourteen["participants"] == 14 and "delay_ms" not in fourteen


def test_server_series_per_role_from_cumulative_cpu_seconds():
    rows = [{"t": 0, "role": "sfu", "cpu_s": 0.0, "rss": 100, "participants": 7},
            {"t": 0, "role": "clients", "cpu_s": 0.0, "rss": 1000, "participants": 7},
            {"t": 10_000, "role": "sfu", "cpu_s": 2.0, "rss": 300, "participants": 7},       # 0.2 cores
            {"t": 10_000, "role": "clients", "cpu_s": 14.0, "rss": 1000, "participants": 7},  # 1.4 cores
            {"t": 20_000, "role": "sfu", "cpu_s": 6.0, "participants": 14},                  # 0.4 cores
            {"t": 30_000, "role": "sfu", "cpu_s": 7.0, "participants": 14}]                  # 0.1 cores
    s7, s14 = series.server_series(rows, [])
    assert s7 == {"participants": 7, "sfu_cpu": pytest.approx(0.2), "sfu_cpu_per_participant": pytest.approx(0.2 / 7),
                  "sfu_rss": 200, "clients_cpu": pytest.approx(1.4), "clients_cpu_per_participant": pytest.approx(0.2),
                  "clients_rss": 1000}
    assert s14["sfu_cpu"] == pytest.approx(0.25)    # 5 CPU-s over 20 s, time-weighted
    assert "sfu_rss" not in s14


def test_background_series_and_totals_pool_sums():
    obs = windows.stream_windows([
        sample(0, 0, phase="background", window=1, direction="recv", peer="a", rtt=0.01),
        sample(0, 0, phase="background", window=1, direction="recv", peer="b", rtt=0.03),
        sample(2000, 250_000, phase="background", window=2, direction="recv", peer="a"),   # 1 Mbps
        sample(1000, 250_000, phase="background", window=2, direction="recv", peer="b"),   # 2 Mbps
        sample(3000, 250_000, phase="background", window=3, direction="recv", peer="b", participants=14),
    ])
    totals = windows.window_totals(obs)
    assert series.background_series(totals) == [
        {"participants": 7, "recv_bps": 1_500_000, "rtt_recv_ms": pytest.approx(20)},
        {"participants": 14, "recv_bps": 0.0}]


def test_window_series():
    obs = windows.stream_windows([
        sample(0, 0, window=3, rtt=0.01), sample(1000, 125_000, window=3, rtt=0.03),
        sample(0, 0, window=3, direction="recv", peer="1-2"), sample(1000, 62_500, window=3, direction="recv",
                                                                     peer="1-2"),
        sample(5000, 0, phase="background", window=4, user="1-2"),
    ])
    w3, w4 = series.window_series(windows.window_totals(obs))
    assert w3 == {"t": 1000, "phase": "ramp", "window": 3, "participants": 7, "send_bps": 1_000_000,
                  "recv_bps": 500_000, "rtt_send_ms": pytest.approx(20)}
    assert w4 == {"t": 5000, "phase": "background", "window": 4, "participants": 7}


# ---------------------------------------------------------------- whole runs

@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    return fakerun.make_run(tmp_path_factory.mktemp("runs"), rooms=4, background_interval_s=15)


def test_analysis_of_a_healthy_run_matches_the_model(healthy):
    a = metrics.analyse(runfiles.load(healthy))
    h = a.headline
    cap = SEND_CAP_BPS
    assert h["participants"] == h["target_participants"] == 28
    assert h["send_bps"] == pytest.approx(0.9 * cap, rel=0.03)
    assert h["recv_bps"] == pytest.approx(0.9 * 0.97 * cap, rel=0.03)
    assert h["recv_total_bps"] == pytest.approx(6 * h["recv_bps"], rel=0.01)
    assert h["rtt_send_ms"] < 10
    assert h["status"] == "ok"
    assert a.knee.participants is None
    assert [r["participants"] for r in a.series] == [7, 14, 21, 28]
    # a stream's first background sample has nothing to take a difference from
    measured = [r for r in a.background if "send_bps" in r]
    assert measured and all(r["send_bps"] == pytest.approx(0.9 * cap, rel=0.05) for r in measured)
    assert h["server_cpu_per_participant"] == pytest.approx((0.05 + 0.0035 * 28) / 28, rel=0.1)
    assert h["client_cpu_per_participant"] == pytest.approx(0.3, rel=0.1)
    assert [r["participants"] for r in a.server] == [7, 14, 21, 28]
    assert a.server[-1]["sfu_cpu"] == pytest.approx(0.05 + 0.0035 * 28, rel=0.1)
    assert a.server[-1]["clients_cpu_per_participant"] == pytest.approx(0.3, rel=0.1)
    assert [w["phase"] for w in a.windows].count("ramp") == 4
    assert all(a.windows[i]["t"] <= a.windows[i + 1]["t"] for i in range(len(a.windows) - 1))


def test_summary_is_per_participant_at_target(healthy):
    s = metrics.summary(healthy)
    json.dumps(s)
    cap = SEND_CAP_BPS
    assert s["status"] == "ok" and s["participants"] == 28
    assert s["target"]["participants"] == 28
    assert s["target"]["send_video_bps"]["n"] == 28
    assert s["target"]["send_video_bps"]["avg"] == pytest.approx(0.9 * cap, rel=0.03)
    assert s["target"]["recv_video_bps"]["avg"] == pytest.approx(6 * 0.9 * 0.97 * cap, rel=0.03)
    assert s["target"]["recv_video_stream_bps"]["n"] == 28 * 6
    assert s["checks"]["total"] == 4 * 49
    assert s["checks"]["passed"] + s["checks"]["failed"] == s["checks"]["total"]


def test_summary_of_a_crashed_run(tmp_path):
    d = fakerun.make_run(tmp_path, rooms=4, crash_after_room=2)
    s = metrics.summary(d)
    assert s["status"] is None and s["target"] is None and s["participants"] == 14
    assert s["checks"]["total"] == 2 * 49


def test_summary_of_an_empty_folder(tmp_path):
    s = metrics.summary(tmp_path)
    assert s["target"] is None and s["checks"]["total"] == 0 and s["checks"]["pass_rate"] is None


def test_load_tolerates_damage(tmp_path):
    d = fakerun.make_run(tmp_path, rooms=3, crash_after_room=2)
    run = runfiles.load(d)
    assert run.damaged == {}
    assert sum(1 for _ in runfiles.iter_video_samples(run)) > 0
    assert run.damaged == {"samples.jsonl": 1}      # the cut-off last line, found while streaming
    assert set(run.missing) == {"quality.jsonl", "speech.jsonl", "server.jsonl"}   # both scored after a run
    (d / "meta.json").write_text("{not json")
    assert "meta.json" in runfiles.load(d).missing


def test_a_count_where_nothing_was_forwarded_has_no_cost_row(tmp_path):
    """Publishers sent, but no receiver got a packet (the SFU took none of their media): the SFU
    spent CPU and forwarded nothing (a bench run once divided by zero there and lost every SFU's
    figures)."""
    lines = [{"t": 1_000 + t, "phase": "ramp", "window": 1, "participants": 7, "user": "a", "peer": peer,
              "direction": direction, "kind": "video", "packets": packets, "bytes": 100 * packets}
             for t in (0, 2000) for direction, peer, packets in (("send", None, 10 + t), ("recv", "b", 0))]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    server = [{"role": "sfu", "edge": "start", "window": 1, "t": 1_000, "cpu_s": 5.0},
              {"role": "sfu", "edge": "end", "window": 1, "t": 3_000, "cpu_s": 5.1}]
    assert cost.cost_series(runfiles.Run(path=tmp_path, meta={}, server=server)) == []


def test_cost_per_forwarded_packet_and_stream_hand_computed(tmp_path):
    """Two receivers, audio and video each, for 2 s at a count of 2; the SFU used 0.1 core-seconds."""
    lines = []
    for user, peer in (("a", "b"), ("b", "a")):
        for kind, pps in (("audio", 50), ("video", 100)):
            for t, k in ((0, 0), (2000, 2)):
                lines.append({"t": 1_000 + t, "phase": "target", "window": 4, "participants": 2, "user": user,
                              "peer": peer, "direction": "recv", "kind": kind, "packets": 10 + pps * k})
    lines.append({"t": 0, "phase": "background", "window": 9, "participants": 2, "user": "a", "peer": "b",
                  "direction": "recv", "kind": "video", "packets": 99_999})
    for user in ("a", "b"):   # each publishes audio and video
        for kind in ("audio", "video"):
            lines.append({"t": 1_500, "phase": "target", "window": 4, "participants": 2, "user": user, "peer": None,
                          "direction": "send", "kind": kind, "packets": 7})
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    server = [{"role": "sfu", "edge": "start", "window": 4, "t": 1_000, "cpu_s": 5.0, "net_rx_bytes": 0,
               "net_tx_bytes": 0, "udp_rcvbuf_errors": 3},
              {"role": "sfu", "edge": "end", "window": 4, "t": 3_000, "cpu_s": 5.1, "net_rx_bytes": 250_000,
               "net_tx_bytes": 500_000, "udp_rcvbuf_errors": 7},
              {"role": "clients", "edge": "end", "window": 4, "t": 3_000, "cpu_s": 99.0}]
    run = runfiles.Run(path=tmp_path, meta={"machine": {"cpu_mhz": 3000}}, server=server)
    [row] = cost.cost_series(run)
    assert row["participants"] == 2 and row["fwd_streams"] == 4
    assert row["fwd_pps"] == pytest.approx(300) and row["sfu_cores_fwd"] == pytest.approx(0.05)
    assert row["sfu_us_per_packet"] == pytest.approx(0.05e6 / 300)
    assert row["sfu_mhz_per_stream"] == pytest.approx(0.05 * 3000 / 4)
    assert row["pub_streams"] == 4 and row["sfu_mhz_per_published"] == pytest.approx(0.05 * 3000 / 4)
    assert row["sfu_in_mbps"] == pytest.approx(1.0) and row["sfu_out_mbps"] == pytest.approx(2.0)
    assert row["sfu_udp_drops"] == pytest.approx(2.0)


# ---------------------------------------------------------------- a run read as it grows

def near(a, b) -> bool:
    """Equal, floats to 1e-9 (sums taken in another order)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(near(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(near(x, y) for x, y in zip(a, b))
    return a == b


def test_a_run_folded_as_it_grows_reads_each_line_once_and_agrees_with_reading_it_whole(tmp_path, monkeypatch):
    """The engine asks for the knee after every step and keeps one SampleFold for it: each line of
    samples.jsonl is parsed once, a line still being written waits for the next read, a window's
    samples are let go once windows.jsonl says it closed, and at every read the analysis is the one
    of the file as it then stands, read whole."""
    d = fakerun.make_run(tmp_path / "runs", rooms=5, knee=21, ramp_samples=4)
    data = (d / "samples.jsonl").read_bytes()
    run = runfiles.load(d)
    ends, at = {}, 0   # (phase, window) -> where its last sample's line ends
    for line in data.splitlines(keepends=True):
        at += len(line)
        s = json.loads(line)
        ends[(s["phase"], s["window"])] = at
    parsed, live_reading = [], []   # the lines the live fold parsed (the whole reads below parse too)
    monkeypatch.setattr(samples, "parse_line",
                        lambda line: (parsed.append(line) if live_reading else None) or runfiles.parse_line(line))
    growing, whole = tmp_path / "growing" / "samples.jsonl", tmp_path / "whole"
    growing.parent.mkdir()
    whole.mkdir()
    fold = samples.SampleFold(growing)
    written, chunk, reads = 0, len(data) // 17 + 37, 0   # the chunks end inside lines
    while written < len(data):
        with open(growing, "ab") as f:
            f.write(data[written:written + chunk])
        written = min(written + chunk, len(data))
        closed = [w for w in run.windows if ends.get((w["phase"], w["window"]), 0) <= written]
        live_reading.append(True)
        fold.read(closed, final=False)
        live_reading.clear()
        live = metrics.analyse(run, samples=fold)
        reads += 1
        assert fold.offset <= written and data[fold.offset - 1:fold.offset] == b"\n"
        assert not [k for k in fold.streams.measured if k[:2] in {(w["phase"], w["window"]) for w in closed}]
        (whole / "samples.jsonl").write_bytes(data[:fold.offset])
        read_whole = metrics.analyse(runfiles.Run(**{**run.__dict__, "path": whole}))
        assert near(live.series, read_whole.series) and near(live.windows, read_whole.windows)
        assert live.knee == read_whole.knee and near(live.cost, read_whole.cost)
    assert reads >= 17 and fold.offset == len(data) and live.knee.participants is not None
    assert live.knee == metrics.analyse(run).knee
    audio_background = sum(1 for line in data.splitlines() if b'"kind": "audio"' in line and b'"phase": "background"' in line)
    assert len(parsed) == data.count(b"\n") - audio_background


# ---------------------------------------------------------------- a window the runner discarded

def _without(d, window, into):
    """A copy of run folder `d` with every line of `window` gone."""
    into.mkdir(parents=True)
    for f in d.iterdir():
        if f.suffix == ".jsonl":
            keep = [line for line in f.read_text().splitlines(keepends=True) if json.loads(line).get("window") != window]
            (into / f.name).write_text("".join(keep))
        else:
            (into / f.name).write_bytes(f.read_bytes())
    return into


def test_a_discarded_window_counts_for_nothing_read_whole_or_as_the_run_grows(tmp_path):
    """A ramp window the runner discarded (its wall clock stepped in it: its samples' rates are
    wrong, here ten times the bytes) gives the analysis of the run without it, whether the run is read
    whole or folded as it grows, as the engine folds it; the report says it was left out."""
    d = fakerun.make_run(tmp_path / "runs", rooms=4, knee=21, ramp_samples=4)
    ramp = [w for w in runfiles.load(d).windows if w["phase"] == "ramp"]
    step = ramp[1]["window"]
    reference = metrics.analyse(runfiles.load(_without(d, step, tmp_path / "without")))
    lines = []
    for line in (d / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["window"] == step and s.get("bytes"):
            s["bytes"] *= 10
        lines.append(json.dumps(s))
    (d / "samples.jsonl").write_text("\n".join(lines) + "\n")
    records = [json.loads(line) for line in (d / "windows.jsonl").read_text().splitlines()]
    (d / "windows.jsonl").write_text("".join(json.dumps({**w, **({"discarded": "the clock stepped"} if w["window"] == step
                                                                  else {})}) + "\n" for w in records))
    run = runfiles.load(d)
    assert list(run.discarded) == [step] and step not in {w["window"] for w in run.windows}
    assert not [r for r in run.server if r.get("window") == step]
    for a in (metrics.analyse(run),
              metrics.analyse(run, samples=samples.SampleFold(d / "samples.jsonl").read(
                  [w for w in records if w["window"] != step], final=False, discarded=[step]))):
        assert near(a.series, reference.series) and near(a.cost, reference.cost) and a.knee == reference.knee
        assert {o["window"] for o in a.obs} == {o["window"] for o in reference.obs}
    from reports import run as run_report
    page = (run_report.build(d)).read_text()
    assert f"A ramp window at {ramp[1]['participants']} participants was left out (the clock stepped)" in page


def test_no_background_rate_is_taken_across_a_discarded_window(tmp_path):
    lines = [sample(0, 0, phase="background", window=1), sample(1000, 125_000, phase="background", window=2),
             sample(2000, 250_000, phase="background", window=3), sample(3000, 375_000, phase="background", window=4)]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    totals = samples.SampleFold(tmp_path / "samples.jsonl", discarded={2}).read().totals
    assert sorted(w for _, w in totals) == [1, 3, 4]
    assert totals[("background", 3)].n["send_bps"] == 0            # no rate from across the step
    assert totals[("background", 4)].sum["send_bps"] == 1_000_000  # then from the next sample on
