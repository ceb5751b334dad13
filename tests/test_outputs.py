"""Outputs (sfubench/outputs/): each a file of its own, found by name, chosen with --output, its
settings in the schema; on a generated run folder each writes what it says it writes."""
import sqlite3

import pytest

from sfubench import config, outputs
from sfubench.events import Bus

from support import fakerun


def test_outputs_are_found_by_name_and_chosen_in_order():
    assert set(outputs.OUTPUTS) == {"report", "history", "pushgateway", "thresholds"}
    chosen = lambda **cli: [o.name for o in outputs.for_run(config.load(cli=cli, env={}), None, print)]
    assert chosen() == ["report", "history"]
    assert chosen(output="history,report") == ["history", "report"]
    assert chosen(output="report") == ["report"]
    # a Pushgateway URL chooses its output, as --pushgateway always did
    assert chosen(pushgateway="http://127.0.0.1:9") == ["report", "history", "pushgateway"]
    # thresholds are judged first: the report shows their verdicts
    assert chosen(assertions=["fps>1"]) == ["thresholds", "report", "history"]


def test_a_wrong_output_is_a_one_line_error():
    with pytest.raises(config.ConfigError, match="no output named junit"):
        config.load(cli={"output": "report,junit"}, env={})
    with pytest.raises(config.ConfigError, match="needs --pushgateway"):
        config.load(cli={"output": "pushgateway"}, env={})


def test_report_and_history_write_the_run_folders_results(tmp_path):
    run = fakerun.make_run(tmp_path, rooms=2, knee=None, seed=5)
    cfg = config.load(cli={"out": str(tmp_path), "output": "report,history"}, env={})
    said = []
    added = {}
    for o in outputs.for_run(cfg, run, said.append):
        o.start(Bus())
        added.update(o.stop())
    assert added["report"] == str(run / "report.html") and (run / "report.html").exists()
    assert (run / "tables.json").exists() and list(run.glob("table-*.csv"))
    with sqlite3.connect(cfg.results_db_path()) as db:
        assert db.execute("select count(*) from runs").fetchone()[0] == 1
    assert not said


def test_thresholds_write_their_verdicts_before_the_report_shows_them(tmp_path):
    run = fakerun.make_run(tmp_path, rooms=2, knee=None, seed=5)
    cfg = config.load(cli={"out": str(tmp_path), "output": "report", "assertions": ["fps.p50>=1", "fps>=1000"]},
                      env={})
    said, meta = [], {}
    for o in outputs.for_run(cfg, run, said.append):
        o.start(Bus())
        meta.update(o.stop())
        if o.name == "thresholds":   # as the engine does: meta.json takes what an output adds
            import json
            (run / "meta.json").write_text(json.dumps({**json.loads((run / "meta.json").read_text()), **meta}))
    assert [v["ok"] for v in meta["thresholds"]["verdicts"]] == [True, False]
    assert meta["thresholds"]["failed"] == 1 and (run / "junit.xml").exists()
    assert said[0].startswith("threshold passed: fps.p50>=1 (") and said[1].startswith("threshold FAILED: fps>=1000 (")
    assert "FAILED: fps&gt;=1000" in (run / "report.html").read_text()
