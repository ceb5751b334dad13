"""A broadcast for real (`--preset broadcast`): one room, its publisher a real Chromium, one viewer
a real Chromium and the other viewers synthetic, all receiving the publisher and sending nothing.
Known answers: the checks are the publisher's own camera and its video at every viewer, no more;
viewers send no stream and no stream is counted missing; every viewer, browser or synthetic,
receives the publisher's video at the clip's rate; the step's videos are each timed to their first
play.

Past the knee, the steps that found and confirmed it overload the SFU by a quarter or more: each
narrowing step below the count the run is at is measured only after the run went down to half the
viewers that coped and the SFU had spare CPU again, so the knee narrowed down is the one the ramp
would have met, not the overload's backlog.

`make test` runs it through Janus; `make test-sfus` through every other adapter that takes viewers;
`make test-e2e` the narrowing after an overload."""
import json
import sys

import pytest

from reports import metrics, runfiles
from sfubench import config, loadtest
from sfubench.progress import Progress
from sfubench.sfu import Adapter

from support.tiers import full, tiered

VIEWING = tuple(n for n in config.available_sfus() if "local" in Adapter.load(n).where and Adapter.load(n).viewers)

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sfu", tiered(VIEWING, core=("janus",)))
def test_viewers_receive_the_publisher_and_send_nothing(sfu, tmp_path):
    cfg = config.load(cli={"sfu": sfu, "preset": "broadcast", "viewer_step": "6", "max_viewers": "6",
                           "out": str(tmp_path), "background_interval": 0, "quality_frames": 0, "audio_seconds": 0,
                           "lab_prefix": "sfubb", "lab_subnet": "127.0.14",
                           "results_db": str(tmp_path / "results.sqlite")}, env={})
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout))
    assert status == "ok", (run_dir / "meta.json").read_text()
    run = runfiles.load(run_dir)
    assert {(c["user"], c["peer"]) for c in run.checks} == {("r1u1", "r1u1")} | {(f"r1u{i}", "r1u1") for i in range(2, 8)}
    assert all(c["ok"] for c in run.checks), run.checks
    started = [e for e in run.events if e["event"] == "participant_started"]
    assert [e.get("publishes", True) for e in started] == [True] + [False] * 6
    assert [e.get("client", "browser") for e in started[:3]] == ["browser", "browser", "synthetic"]
    target = [o for o in metrics.analyse(run).obs if o["phase"] == "target" and o["kind"] == "video"]
    assert {o["user"] for o in target if o["direction"] == "send"} == {"r1u1"}
    received = {o["user"]: o for o in target if o["direction"] == "recv"}
    assert set(received) == {f"r1u{i}" for i in range(2, 8)} and not any(o.get("missing") for o in target)
    assert all(o["peer"] == "r1u1" and o["fps"] >= 10 for o in received.values()), received
    # the step's videos (the publisher's camera at itself and at each viewer), each timed to its first play
    first = json.loads((run_dir / "tables.json").read_text())["tables"]["first_video"]["rows"]
    assert [row[:3] for row in first] == [[7, 7, 0]] and 0 < first[0][3] <= first[0][5] < cfg.video_timeout, first


@full
def test_past_the_knee_each_narrowing_step_down_follows_a_recovery_at_half_the_viewers(tmp_path):
    """Every participant synthetic, the in-house SFU on a budget small enough for a knee within a
    hundred viewers."""
    cfg = config.load(cli={"sfu": "inhouse", "preset": "broadcast", "real_rooms": "0", "sfu_cpus": "0.1",
                           "max_viewers": "200", "out": str(tmp_path), "background_interval": 0,
                           "quality_frames": 0, "audio_seconds": 0, "lab_prefix": "sfubb", "lab_subnet": "127.0.14",
                           "results_db": str(tmp_path / "results.sqlite")}, env={})
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout))
    assert status == "ok", (run_dir / "meta.json").read_text()
    run = runfiles.load(run_dir)
    ramp = [(w["opened"], w["participants"]) for w in run.windows if w["phase"] == "ramp"]
    recoveries = [e for e in run.events if e["event"] in ("sfu_recovered", "sfu_not_recovered")]
    edges = {(r["window"], r["edge"]): r for r in run.server if r["role"] == "sfu" and r["phase"] == "ramp"}
    used = {}   # the SFU's share of its budget in each count's first ramp window, as the ramp met it
    for (window, edge), end in sorted(edges.items()):
        start = edges.get((window, "start"))
        if edge == "end" and start and end["participants"] not in used:
            used[end["participants"]] = (end["cpu_s"] - start["cpu_s"]) / ((end["t"] - start["t"]) / 1000) / 0.1
    knee = metrics.analyse(run).knee
    assert knee.participants is not None and not knee.client_bound, knee
    assert recoveries, "a knee confirmed by a step a quarter above it, and no recovery before narrowing down"
    for before, after in zip(ramp, ramp[1:]):
        if after[1] < before[1]:   # measured below the step before it: a recovery came between them
            between = [e for e in recoveries if before[0] < e["t"] < after[0]]
            assert [e["event"] for e in between] == ["sfu_recovered"], (before, after, recoveries)
            # held at half the viewers that coped, which are fewer than the step's, until the SFU
            # used no more than at the next count up on the way up (server.jsonl's ramp windows)
            held = between[0]["participants"]
            assert held <= 1 + (after[1] - 1) // 2, (after, between)
            way_up = used[min(c for c in used if c >= held)]
            assert between[0]["limit"] == pytest.approx(way_up + 0.05, abs=0.011), (way_up, between)
            assert between[0]["budget_share"] <= between[0]["limit"], between
    assert {w["phase"] for w in run.windows} <= {"ramp", "target"}, "a recovery measures nothing"
