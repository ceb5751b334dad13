"""Thresholds (--assert): the grammar and its one-line errors, the judgement on a recorded run, the
percentiles it judges (against numpy), the JUnit file (against the schema CI servers read), and the
command's exit status for bad input. The real runs' exit statuses are in test_e2e.py."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reports import catalog, metrics, runfiles
from reports import thresholds as t
from sfubench import config
from sfubench.config import ConfigError

from support import fakerun

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("text,key,op,value", [
    ("fps.p50>=13.5", "fps_p50", ">=", 13.5),
    ("rtt_send_ms.p95<100", "rtt_send_ms_p95", "<", 100),
    ("knee>=35", "knee", ">=", 35),
    ("checks==100%", "check_pass_rate", "==", 100),
    (" jitter_ms.max <= 3e1 ", "jitter_ms_max", "<=", 30),
    ("recv_bps.mean!=0", "recv_bps", "!=", 0),
])
def test_the_grammar(text, key, op, value):
    th = t.parse(text)
    assert (th.key, th.op, th.value) == (key, op, value)


@pytest.mark.parametrize("text,error", [
    ("fps.p50>>=x", "not an expression of the form FIGURE[.STAT] OP NUMBER[%]"),
    ("fsp.p50>=1", "no figure 'fsp' (did you mean fps?)"),
    ("knee.p95>3", "knee is one number per run, without percentiles"),
    ("fps.p42>1", "no statistic 'p42'; one of mean, p50, p90, p95, p99, max"),
    ("send_bps>1%", "send_bps is in Mbps, not %"),
    ("fps", "not an expression"),
])
def test_a_bad_expression_is_named_in_one_line(text, error):
    with pytest.raises(t.ThresholdError) as e:
        t.parse(text)
    assert error in str(e.value) and "\n" not in str(e.value)


def test_every_figure_can_be_named():
    for f in catalog.FIGURES:
        assert t.parse(f"{f.name}>=0").figure is f
        for p in catalog.PERCENTILES if f.spread else ():
            assert t.parse(f"{f.name}.{p}>=0").key == f"{f.name}_{p}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    run = fakerun.make_run(tmp_path_factory.mktemp("runs"), rooms=3, seed=4)
    return metrics.analyse(runfiles.load(run))


def test_percentiles_are_numpys_over_the_target_windows_observations(recorded):
    target = [o for o in recorded.obs if o["phase"] == "target" and o["kind"] == "video"]
    recv = [o for o in target if o["direction"] == "recv"]
    h = recorded.headline
    for name, values in (("fps", [o["fps"] for o in recv]), ("jitter_ms", [o["jitter_ms"] for o in recv]),
                         ("rtt_send_ms", [r for o in target if o["direction"] == "send" for r in o["rtt"]])):
        values = np.array([v for v in values if v is not None], dtype=float)
        assert len(values) > 10
        for p in ("p50", "p90", "p95", "p99"):
            assert h[f"{name}_{p}"] == pytest.approx(np.percentile(values, float(p[1:])), rel=1e-12)
        assert h[f"{name}_max"] == values.max() and h[name] == pytest.approx(values.mean())


def test_the_judgement_uses_the_shown_unit_and_fails_what_was_not_measured(recorded):
    h = recorded.headline
    fps = h["fps_p50"]
    verdicts = t.judge(t.parse_all([f"fps.p50>={fps - 0.5}", f"fps.p50>={fps + 0.5}", "checks==100%",
                                    f"send_bps<{h['send_bps'] * 1e-6 + 0.01}", "knee>=1"]), h)
    assert [v["ok"] for v in verdicts] == [True, False, h["check_pass_rate"] == 1, True, False]
    assert verdicts[-1]["value"] is None and t.line(verdicts[-1]) == "FAILED: knee>=1 (not measured)"
    assert t.line(verdicts[0]) == f"passed: fps.p50>={fps - 0.5} ({fps:.6g} fps)"


def test_the_junit_file_is_valid_for_ci_servers(recorded, tmp_path, junit_schema):
    verdicts = t.judge(t.parse_all(["fps.p50>=1", "fps.p50>=1000", "rtt_send_ms.p95<1e6"]), recorded.headline)
    path = t.write_junit(t.cases(verdicts), tmp_path / "junit.xml", "thresholds.run")
    junit_schema.validate(str(path))
    text = path.read_text()
    assert 'tests="3" failures="1"' in text and "FAILED: fps.p50&gt;=1000" in text


def test_assert_comes_from_flags_a_file_and_the_environment(tmp_path):
    c = config.load(cli={"assertions": ["fps.p50>=1", "knee>=7"]}, env={})
    assert c.assertions == "fps.p50>=1;knee>=7"
    f = tmp_path / "c.toml"
    f.write_text('assert = ["checks==100%", "fps.p95<100"]\n')
    assert config.load(file=f, env={}).assertions == "checks==100%;fps.p95<100"
    assert config.load(env={"SFUBENCH_ASSERT": "knee>=7"}).assertions == "knee>=7"
    with pytest.raises(ConfigError, match="no figure 'fsp'"):
        config.load(cli={"assertions": ["fsp>1"]}, env={})
    with pytest.raises(ConfigError, match="--output thresholds needs at least one --assert"):
        config.load(cli={"output": "report,thresholds"}, env={})


def test_a_bad_expression_exits_2_before_anything_starts(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "loadtest", "--assert", "fps.p50>=1",
                        "--assert", "fps.p50>>=x", "--out", str(tmp_path / "runs")],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "fps.p50>>=x" in r.stderr, r.stderr
    assert not (tmp_path / "runs").exists() and r.stdout == ""


def test_help_lists_the_figures():
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "loadtest", "--help"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    text = " ".join(r.stdout.split())
    assert "--assert EXPR" in text and all(f.name in text for f in catalog.FIGURES)


def test_a_trend_fails_on_a_regression_only(tmp_path, junit_schema):
    """Six nights of one SFU within their noise exit 0; a seventh much worse exits 3 and its JUnit
    file names the regressed figures."""
    db = tmp_path / "results.sqlite"
    from reports import history
    day = 86_400_000
    for i in range(6):
        history.record(fakerun.make_run(tmp_path, rooms=4, seed=i, start_ms=1_760_000_000_000 + i * day), db)

    def trend(junit):
        return subprocess.run([sys.executable, "-m", "sfubench.cli", "trend", "--sfu", "janus", "--db", str(db),
                               "--junit", str(junit)], capture_output=True, text=True, cwd=ROOT, timeout=120)

    calm = trend(tmp_path / "calm.xml")
    assert calm.returncode == 0 and "REGRESSION" not in calm.stdout, calm.stdout + calm.stderr
    junit_schema.validate(str(tmp_path / "calm.xml"))
    history.record(fakerun.make_run(tmp_path, rooms=4, seed=6, knee=21, start_ms=1_760_000_000_000 + 6 * day), db)
    bad = trend(tmp_path / "bad.xml")
    assert bad.returncode == 3 and "REGRESSION" in bad.stdout, bad.stdout + bad.stderr
    junit_schema.validate(str(tmp_path / "bad.xml"))
    failed = [line.split()[0] for line in bad.stdout.splitlines() if line.endswith("REGRESSION")]
    text = (tmp_path / "bad.xml").read_text()
    assert failed and all(f'name="{m} of the latest run' in text for m in failed)
    assert text.count("<failure") == len(failed)


def test_abort_on_fail_stops_the_ramp_at_the_first_failing_step_and_exits_3(tmp_path, junit_schema):
    """A real all-synthetic ramp of rooms of 3 whose second step breaks `participants<5`: no third
    room starts, the target is measured at 6, the command exits 3 and JUnit names the step."""
    out = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "inhouse", "--users-per-room", "3",
                        "--real-rooms", "0", "--max-rooms", "4", "--sfu-cpus", "0.5", "--ramp-samples", "2", "--target-samples", "2",
                        "--settle", "0", "--quality-frames", "0", "--assert", "participants<5", "--assert",
                        "checks==100%", "--abort-on-fail", "--out", str(out), "--lab-prefix", "sfubab",
                        "--lab-subnet", "127.0.23"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert "FAILED: participants<5" in r.stdout and "at 6 participants: no more load (--abort-on-fail)" in r.stdout, \
        r.stdout[-3000:]
    (run,) = [d for d in out.iterdir() if d.is_dir()]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert max(e["room"] or 0 for e in events) == 2
    (target,) = [e for e in events if e["event"] == "target_reached"]
    assert target["participants"] == 6 and "--abort-on-fail" in target["reason"]
    junit_schema.validate(str(run / "junit.xml"))
    junit = (run / "junit.xml").read_text()
    assert junit.count("<failure") == 2 and "where the ramp stopped" in junit   # at the step and at target
    assert 'name="checks==100%"' in junit


def test_abort_on_fail_without_a_threshold_is_bad_input(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "loadtest", "--abort-on-fail", "--out",
                        str(tmp_path / "runs")], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--abort-on-fail" in r.stderr, r.stderr
