"""A planned restart for real (`--preset restart`): rooms of a real Chromium and synthetic
participants, measured; then the site stops the SFU and starts it again, every participant whose
session ended rejoins after its adapter's delays, and each is timed until it has every video of its
room again; then the rooms are measured again.

Known answers: through the in-house SFU, whose sessions all end with it, every participant rejoins
and has video again within 30 s, and each is counted once (one recovery event, one row of the
report's shares); with reconnects off, no participant gets video back, and every one is reported
so; the restart is an event of the run, not its failure (status ok, exit 0). Its network variant
(`--outage link`): the link cut for less than ICE's failure timeouts costs no session, every
participant's video comes back with no rejoin; cut past them, the in-house SFU's clients (whose
pages and sessions end on a failed connection) all rejoin and are back within 30 s of the link's
return. `make test` runs the first; `make test-e2e` the rest."""
import sys

import pytest

from reports import metrics, restart, runfiles
from sfubench import config, loadtest
from sfubench.progress import Progress

from support.tiers import full

pytestmark = pytest.mark.e2e


def restart_run(tmp_path, sfu="inhouse", **more):
    cfg = config.load(cli={"sfu": sfu, "preset": "restart", "rooms": "2", "out": str(tmp_path),
                           "background_interval": 0, "quality_frames": 0, "audio_seconds": 0,
                           "lab_prefix": "sfubr", "lab_subnet": "127.0.16",
                           "results_db": str(tmp_path / "results.sqlite"), **more}, env={})
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout))
    assert status == "ok", (run_dir / "meta.json").read_text()
    return runfiles.load(run_dir)


def of(run, name):
    return [e for e in run.events if e["event"] == name]


def test_after_a_planned_restart_every_participant_has_video_again_within_30_s_once(tmp_path):
    run = restart_run(tmp_path)
    users = {e["user"] for e in of(run, "participant_started")}
    assert len(users) == 14 and len(of(run, "sfu_restarted")) == 1 and not of(run, "sfu_exited")
    back = of(run, "participant_recovered")
    assert sorted(e["user"] for e in back) == sorted(users) and not of(run, "participant_not_recovered")
    assert all(0 < e["seconds"] <= 30 and e["rejoins"] >= 1 for e in back), back
    rows = {r["clients"]: r for r in restart.restart_rows(run.events)}
    assert rows["all"]["restarted_participants"] == 14 and rows["all"]["recovered_30s_pct"] == 100.0
    assert rows["browser"]["restarted_participants"] == 1 and rows["synthetic"]["restarted_participants"] == 13
    # measured again after it: every video of both rooms flows through the restarted SFU
    a = metrics.analyse(run)
    last = max(w["window"] for w in run.windows if w["phase"] == "ramp")
    after = [o for o in a.obs if o["window"] == last and o["kind"] == "video" and o["direction"] == "recv"]
    assert len(after) == 14 * 6 and all(o["bps"] > 0 for o in after), after
    assert "<h2>Planned restart</h2>" in (run.path / "report.html").read_text()


@full
def test_with_reconnects_off_no_participant_gets_video_back(tmp_path):
    run = restart_run(tmp_path, reconnect="false", recovery_timeout="15")
    assert not of(run, "participant_recovered") and len(of(run, "participant_not_recovered")) == 14
    (_, _, every) = restart.restart_rows(run.events)
    assert (every["recovered_60s_pct"], every["not_recovered"], every["rejoins"]) == (0.0, 14, 0)


@full
def test_janus_participants_rejoin_after_a_planned_restart(tmp_path):
    """Every session ends with Janus; every participant rejoins and is counted once. Measured here
    (2-core Intel VM): 13 of 14 back within 4 s once, one synthetic participant never getting one
    feed of its room (a subscription racing the room's rejoins, not explained); 14 of 14 within
    2.7 s the next time: so at least 12, not all."""
    run = restart_run(tmp_path, "janus")
    counted = [e["user"] for e in run.events if e["event"] in ("participant_recovered", "participant_not_recovered")]
    assert len(counted) == len(set(counted)) == 14
    assert all(e["rejoins"] >= 1 for e in run.events if e["event"] in ("participant_recovered",
                                                                       "participant_not_recovered"))
    (_, _, every) = restart.restart_rows(run.events)
    assert every["recovered_10s_pct"] >= 100 * 12 / 14, every


@full
def test_a_link_cut_shorter_than_ices_failure_timeout_costs_no_session(tmp_path):
    run = restart_run(tmp_path, rooms="1", outage="link", outage_seconds="8")
    (cut,) = of(run, "link_cut")
    assert cut["seconds"] == 8 and len(of(run, "link_restored")) == 1 and not of(run, "sfu_restart")
    back = of(run, "participant_recovered")
    assert len(back) == 7 and all(e["rejoins"] == 0 for e in back) and not of(run, "participant_failed"), back
    assert not of(run, "ice_restart")


@full
def test_a_link_cut_past_ices_failure_timeout_ends_sessions_that_rejoin_once_it_is_back(tmp_path):
    run = restart_run(tmp_path, rooms="1", outage="link")
    back = of(run, "participant_recovered")
    assert len(back) == 7 and not of(run, "participant_not_recovered"), run.events
    assert all(e["rejoins"] >= 1 and 0 < e["seconds"] <= 30 for e in back), back
    (_, _, every) = restart.restart_rows(run.events)
    assert every["restart_down_s"] >= 40 and every["recovered_30s_pct"] == 100.0 and every["ice_restarts"] == 0
    assert "After the clients&#x27; link was cut" in (run.path / "report.html").read_text()
