"""Join storms for real (`--preset join-storm`) through Janus: a background room (a real Chromium
and six synthetic participants), then storms of synthetic participants, each all joining at once in
rooms of their own while a window measures the background, each leaving before the next.

Known answers: every storm is timed from its joins to its first frames, its joins counted, none
failed; its window measures the background alone; the first storm's participants have left when the
second joins, within a second of each other. Behind 100 ms of round trip, a storm's median first
frame through the in-house SFU comes 3 to 8 round trips later than on the plain link (its one
offer and answer, ICE, DTLS and the first keyframe each cost round trips). Janus's videoroom, joined
request by request as janus.js does (session, handle, join, configure; the subscriber's handle, join
and start), takes about ten: measured, not a known answer. `make test` runs the first; `make
test-e2e` the second."""
import json
import sys

import pytest

from reports import catalog, metrics, runfiles, storm
from sfubench import config, loadtest
from sfubench.progress import Progress

from support.tiers import full

pytestmark = pytest.mark.e2e


def storm_run(tmp_path, sfu="janus", first="14", **more):
    cfg = config.load(cli={"sfu": sfu, "preset": "join-storm", "rooms": "1", "first_storm": first,
                           "out": str(tmp_path), "background_interval": 0, "quality_frames": 0, "audio_seconds": 0,
                           "lab_prefix": "sfubj", "lab_subnet": "127.0.15",
                           "results_db": str(tmp_path / "results.sqlite"), **more}, env={})
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout))
    assert status == "ok", (run_dir / "meta.json").read_text()
    return run_dir


def storms(run_dir) -> list[dict]:
    """tables.json's storms, each row by the catalogue's names of its columns."""
    table = json.loads((run_dir / "tables.json").read_text())["tables"]["storms"]
    keys = ["participants", *(f.name for f in storm.FIGURES)]
    assert table["columns"] == [catalog.ENTRIES[k].column for k in keys]
    return [dict(zip(keys, row)) for row in table["rows"]]


def test_each_storm_joins_at_once_on_the_background_and_is_timed_to_its_first_frames(tmp_path):
    run_dir = storm_run(tmp_path, first="7", max_storm="14")
    rows = storms(run_dir)
    assert [(r["participants"], r["storm"], r["joins_failed"]) for r in rows] == [(14, 7, 0), (21, 14, 0)], rows
    for r in rows:
        assert 0 < r["first_frame_p50_s"] <= r["first_frame_p95_s"] <= r["first_frame_p99_s"] \
            <= r["first_frame_max_s"] < 10, r
        assert r["storm_sfu_cores"] > 0, r
    run = runfiles.load(run_dir)
    windows = [w for w in run.windows if w["phase"] == "storm"]
    assert [(w["participants"], w["expected"]) for w in windows] == [(14, 7), (21, 7)], windows
    # each storm's newcomers: synthetic, joining within a second, after the last storm's have left
    events = run.events
    marks = [i for i, e in enumerate(events) if e["event"] == "storm_started"]
    assert [events[i]["storm"] for i in marks] == [7, 14]
    assert sum(e["event"] == "participant_left" for e in events[marks[0]:marks[1]]) == 7
    for i, size in zip(marks, (7, 14)):
        joins = [e for e in events[i:] if e["event"] in ("participant_started", "participant_rejoined")][:size]
        assert all(e.get("client", "synthetic") == "synthetic" for e in joins if e["event"] == "participant_started")
        assert max(e["t"] for e in joins) - min(e["t"] for e in joins) < 1000, joins
    timed = [c for c in run.checks if c["participants"] in (14, 21) and c["user"] != c["peer"]]
    assert len(timed) == 7 * 6 + 14 * 6 and all(c["ok"] and c["first_frame_s"] > 0 for c in timed)
    a = metrics.analyse(run)
    assert a.rule.name == "storm knee" and not [h for h in a.health if h["client_bound"]], a.health
    assert "<h2>Join storms</h2>" in (run_dir / "report.html").read_text()


@full
def test_a_storm_behind_100_ms_of_round_trip_plays_3_to_8_round_trips_later(tmp_path):
    far = tmp_path / "far.toml"
    far.write_text("delay_ms = 50\n")
    # Storms of 7, and neither run client-bound: on a nested 2-core VM storms of 14 left both runs'
    # clients short of CPU (the far one's beside the link emulator), their first frames the clients'
    # and not the link's.
    plain = storm_run(tmp_path / "plain", "inhouse", first="7", max_storm="7")
    behind = storm_run(tmp_path / "far", "inhouse", first="7", max_storm="7", synthetic_network=str(far))
    for run_dir in (plain, behind):
        health = metrics.analyse(runfiles.load(run_dir)).health
        assert not [h for h in health if h["client_bound"]], health
    (near,), (late,) = storms(plain), storms(behind)
    assert near["joins_failed"] == late["joins_failed"] == 0
    extra = late["first_frame_p50_s"] - near["first_frame_p50_s"]
    assert 0.3 <= extra <= 0.8, (near, late)
