"""bench/forwarding.py for real, briefly: one all-synthetic room of 5 against the in-house SFU and
Janus, each pinned to its own core; both must forward everyone's media to everyone, and the cost
and generator tables and the summary (the keys `make bench` users read) must come out for both."""
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent


def test_both_sfus_forward_a_synthetic_room_and_their_cost_is_compared(tmp_path):
    out = tmp_path / "forwarding.json"
    # Own lab names, so `make bench` or a loadtest beside the suite does not collide with it.
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "forwarding.py"), "--sfus", "inhouse,janus",
         "--rooms", "1", "--users-per-room", "5", "--knee-load", "5", "--lab-prefix", "sfubft", "--lab-subnet", "127.0.5",
         "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    res = json.loads(out.read_text())
    assert list(res["cost"]) == ["inhouse", "janus"]
    for sfu, steps in res["cost"].items():
        row = steps["5"]
        # 5 members each receive 4 audio and 4 video tracks
        assert row["fwd_streams"] == 5 * 4 * 2, (sfu, row)
        # at least 50 audio packets/s and one packet per video frame (15 fps) for each of them
        assert row["fwd_pps"] >= 5 * 4 * (50 + 15) * 0.9, (sfu, row)
        assert 0 < row["sfu_us_per_packet"] < 10_000, (sfu, row)
        gen = res["generator"][sfu]
        assert {g["phase"] for g in gen} == {"ramp", "target"}, gen
        assert all(g["received_streams"] == 40 and g["cores"] > 0 for g in gen), gen
    assert "inhouse / janus per packet" in r.stdout and "streams per core" in r.stdout, r.stdout
    summary = res["summary"]
    for sfu in ("inhouse", "janus"):
        # the knee load's figure is the cost table's; twice it (10) was not reached
        assert summary["sfus"][sfu]["us_per_forwarded_packet"] == res["cost"][sfu]["5"]["sfu_us_per_packet"]
        assert summary["sfus"][sfu]["us_per_forwarded_packet_2x"] is None
    ratio = summary["ratios"]["inhouse/janus"]["us_per_forwarded_packet"]
    assert ratio == summary["sfus"]["inhouse"]["us_per_forwarded_packet"] / summary["sfus"]["janus"]["us_per_forwarded_packet"]
    gen = summary["generator"]
    if gen["streams_per_core"] is not None:   # None: no window kept the pacing under 1 ms, said so
        assert gen["received_streams"] == 40 and gen["pacing_p99_ms"] < 1.0, gen
    else:
        assert "no step kept the pacing p99 under" in r.stdout, r.stdout
    assert "inhouse / SFU at 5" in r.stdout, r.stdout


def test_rounds_are_summed_up_as_medians_with_their_spread():
    sys.path.insert(0, str(ROOT / "bench"))
    import forwarding

    def one(janus_us, ratio, per_core):
        return {"generator": {"streams_per_core": per_core, "pacing_p99_ms": 0.2, "received_streams": 500},
                "sfus": {"janus": {"participants": 42, "us_per_forwarded_packet": janus_us,
                                   "us_per_forwarded_packet_2x": None}},
                "ratios": {"inhouse/janus": {"us_per_forwarded_packet": ratio}}, "runs": 1}
    s = forwarding.combined([one(18.0, 0.5, 2000), one(20.0, 0.4, 2600), one(22.0, 0.45, 2200)])
    assert s["runs"] == 3
    janus = s["sfus"]["janus"]
    assert janus["us_per_forwarded_packet"] == 20.0 and janus["us_per_forwarded_packet_runs"] == [18.0, 20.0, 22.0]
    assert janus["us_per_forwarded_packet_spread"] == 0.2 and janus["participants"] == 42
    assert janus["us_per_forwarded_packet_2x"] is None and janus["us_per_forwarded_packet_2x_spread"] is None
    assert s["ratios"]["inhouse/janus"]["us_per_forwarded_packet"] == 0.45
    assert s["generator"]["streams_per_core"] == 2200


def test_a_count_whose_sfu_carried_more_than_media_is_left_out_of_its_cost():
    """The synthetic LiveKit participant once lost its session and the SFU's signalling ran at
    1.1 MB/s: that count's cost is the driver's, not the SFU's, and the bench says so."""
    sys.path.insert(0, str(ROOT / "bench"))
    import forwarding

    def row(p, signalling_kbps):
        return {"participants": p, "sfu_us_per_packet": 20.0, "sfu_media_in_ratio": 1.1, "sfu_media_out_ratio": 1.1,
                "sfu_signalling_kbps_per_participant": signalling_kbps}
    analysis = SimpleNamespace(health=[{"participants": 14, "client_bound": True}],
                               cost=[row(7, 3255.0), row(14, 2.0), row(21, 2.0)])   # what sfu_cost reads
    assert list(forwarding.sfu_cost(analysis)) == [21]
