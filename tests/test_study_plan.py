"""The study's bookkeeping (sfubench/study.py) on its record and on generated run folders: which runs
are run again and why, when an attempt is the last, which SFUs get a run beyond --repeat. (The runs
themselves, real ones, are tests/test_study.py's.)"""
import json

from reports import metrics, runfiles
from sfubench import config, study

from support import fakerun


def a_study(tmp_path, runs: list[dict], repeat: int = 2, bounds: study.Bounds = study.Bounds()) -> study.Study:
    s = study.Study(config.load(cli={"sfu_cpus": "0.4"}, env={}), ["janus", "inhouse"], repeat, tmp_path,
                    bounds=bounds)
    s.state["runs"] = runs
    return s


def test_a_run_is_run_again_for_a_passing_cause_only(tmp_path):
    starved = fakerun.make_run(tmp_path / "a", client_bound_after=0, knee=None)
    a = metrics.analyse(runfiles.load(starved))
    assert a.knee.client_bound and a.knee.participants == 7
    assert study.retry_reason({"status": "ok", "run_dir": str(starved)}, a).startswith(
        "client-bound at its first count (7)")
    # a restart run's windows after its outage, client-bound by the rejoins: the outage's, counted
    with open(starved / "events.jsonl", "a") as f:
        f.write(json.dumps({"t": min(w["opened"] for w in a.run.windows) - 1, "event": "sfu_restart"}) + "\n")
    assert study.retry_reason({"status": "ok", "run_dir": str(starved)}, a) is None
    # an outage after every window leaves them the machine's, as without one
    cut = fakerun.make_run(tmp_path / "e", client_bound_after=0, knee=None)
    with open(cut / "events.jsonl", "a") as f:
        f.write(json.dumps({"t": 10 ** 13, "event": "link_cut"}) + "\n")
    assert study.retry_reason({"status": "ok", "run_dir": str(cut)}, metrics.analyse(runfiles.load(cut))).startswith(
        "client-bound at its first count")
    later = fakerun.make_run(tmp_path / "b", rooms=4, client_bound_after=14, knee=None)
    a = metrics.analyse(runfiles.load(later))
    assert a.knee.client_bound and a.knee.participants > 7 and study.retry_reason({"status": "ok", "run_dir": str(later)},
                                                                                  a) is None
    fine = fakerun.make_run(tmp_path / "c", knee=14)
    events = fine / "events.jsonl"
    assert study.retry_reason({"status": "ok", "run_dir": str(fine)}, metrics.analyse(runfiles.load(fine))) is None
    with open(events, "a") as f:
        f.write(json.dumps({"t": 1, "event": "browser_error", "browser": 1, "call": "open", "reason": "x"}) + "\n")
    assert study.retry_reason({"status": "ok", "run_dir": str(fine)}, None) == "a browser session would not open"
    failed = fakerun.make_run(tmp_path / "d", knee=14)
    with open(failed / "events.jsonl", "a") as f:
        f.write(json.dumps({"t": 1, "event": "clock_stepped", "seconds": 0.8}) + "\n")
    assert "stepped" in study.retry_reason({"status": "failed", "run_dir": str(failed)}, None)
    assert study.retry_reason({"status": "failed", "run_dir": None}, None) is None   # the SFU's, not the machine's


def test_an_attempt_past_the_retries_is_the_last(tmp_path):
    runs = [{"sfu": "janus", "repeat": 1, "attempt": 1, "status": "ok", "retried": "client-bound"}]
    s = a_study(tmp_path, runs)
    assert not s._done("janus", 1)              # one retry left
    runs.append({"sfu": "janus", "repeat": 1, "attempt": 2, "status": "ok", "retried": "client-bound"})
    assert s._done("janus", 1)                  # none left: it stands, not counted
    assert s.counted("janus") == []
    assert a_study(tmp_path, runs[:1], bounds=study.Bounds(retries=0))._done("janus", 1)


def test_an_sfu_left_with_one_counted_run_runs_again_up_to_the_bound(tmp_path):
    ok = {"status": "ok", "attempt": 1}
    runs = [{"sfu": "janus", "repeat": 1, **ok}, {"sfu": "janus", "repeat": 2, **ok, "retried": "client-bound"},
            {"sfu": "janus", "repeat": 2, **ok, "attempt": 2, "retried": "client-bound"},
            {"sfu": "inhouse", "repeat": 1, **ok}, {"sfu": "inhouse", "repeat": 2, **ok}]
    s = a_study(tmp_path, runs)
    assert s._extra(["janus", "inhouse"]) == [("janus", 3)]
    runs.append({"sfu": "janus", "repeat": 3, **ok, "retried": "client-bound"})
    runs.append({"sfu": "janus", "repeat": 3, **ok, "attempt": 2, "retried": "client-bound"})
    assert s._extra(["janus", "inhouse"]) == [("janus", 4)]
    runs.append({"sfu": "janus", "repeat": 4, **ok, "status": "failed"})
    assert s._extra(["janus", "inhouse"]) == []           # two beyond --repeat: the bound
    assert a_study(tmp_path, runs[:1], repeat=1)._extra(["janus"]) == []   # one asked for: one is the answer
    none = [{"sfu": "janus", "repeat": 1, "status": "failed"}, {"sfu": "janus", "repeat": 2, "status": "failed"}]
    assert a_study(tmp_path, none)._extra(["janus"]) == []   # a failing SFU is not run again and again


def test_each_runs_settings_hold_what_its_shape_uses_and_no_password(tmp_path):
    """scenario.toml, the settings every run of the study is given: the study's own that are not at
    their default, none of another shape's, and a results database's password never: that URL goes
    to each run in its environment (what `sfubench loadtest` reads as SFUBENCH_RESULTS_DB)."""
    url = "postgresql://sfubench:s3cret-pw@db.internal:5432/sfubench"
    s = study.Study(config.load(cli={"sfu_cpus": "0.4", "shape": "ramp", "rooms": "3", "results_db": url}, env={}),
                    ["janus"], 1, tmp_path)
    s._write_scenario()
    text = (tmp_path / "scenario.toml").read_text()
    assert "s3cret-pw" not in text and "results-db" not in text
    assert s.secret_env == {"SFUBENCH_RESULTS_DB": url}
    given = config.load(file=tmp_path / "scenario.toml", env=s.secret_env, cli={"sfu": "janus"})
    assert (given.shape, given.rooms, given.sfu_cpus, given.results_db) == ("ramp", 3, 0.4, url)
    assert "ramp-minutes" not in text and "max-rooms" not in text   # the until-knee shape's, unused here


def test_a_study_read_from_elsewhere_finds_its_runs_in_its_folder(tmp_path, monkeypatch):
    """A record made where the study was started holds run folders relative to there; read from
    another directory (or moved), the study finds each in its own runs/."""
    monkeypatch.chdir(tmp_path)
    cfg = config.load(cli={"sfu_cpus": "0.4"}, env={})
    scenario = study.Study(cfg, ["janus"], 1, "study").state["scenario"]
    run = fakerun.make_run(tmp_path / "study" / "runs", knee=14)
    (tmp_path / "study" / "study.json").write_text(json.dumps({"scenario": scenario, "runs": [
        {"sfu": "janus", "repeat": 1, "attempt": 1, "status": "ok", "run_dir": f"elsewhere/runs/{run.name}"}]}))
    s = study.Study(cfg, ["janus"], 1, "study")
    assert s.out.is_absolute() and [r["run_dir"] for r in s.counted("janus")] == [str(run)]
