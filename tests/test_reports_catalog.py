"""The catalogue (reports/catalog.py) is the one place a figure or column is declared: every table,
plot and comparison of the reports, the results database, the trend, Prometheus's names, the Grafana
dashboard and the docs name only what it declares, and a run's analysis measures every figure it declares."""
import json
import re
from pathlib import Path

import pytest

from reports import catalog, compare, history, metrics, prometheus, run, runfigures, runfiles, tables
from reports.plotting import Panel
from reports.table import Column, Table, UndeclaredColumn

from support import fakerun

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    run = fakerun.make_run(tmp_path_factory.mktemp("runs"), rooms=4, knee=21, seed=3)
    return metrics.analyse(runfiles.load(run))


def test_every_place_names_only_what_the_catalogue_declares():
    names = {f.name for f in catalog.FIGURES}
    assert len(names) == len(catalog.FIGURES), "a figure is declared twice"
    assert len(catalog.ENTRIES) == len(catalog.FIGURES) + len(catalog.STEP_FIGURES) + len(catalog.LABELS), \
        "an entry is declared twice"
    assert set(history.METRICS) | set(history.UNITS) | set(history.TITLES) <= names
    assert set(history.RECORDED) | set(history.ABSOLUTE_FLOOR) <= names | set(catalog.percentiles())
    assert set(prometheus.METRICS) | {prometheus.PARTICIPANTS} == catalog.prometheus_names()


def test_the_dashboard_queries_only_the_catalogues_series():
    dashboard = (ROOT / "reports" / "grafana-dashboard.json").read_text()
    used = set(re.findall(r"sfubench_[a-z_]+", json.dumps(json.loads(dashboard))))
    assert used and used <= catalog.prometheus_names(), used - catalog.prometheus_names()


def test_the_docs_list_is_the_catalogue():
    assert (ROOT / "docs" / "metrics.md").read_text() == catalog.markdown(), \
        "docs/metrics.md is stale: run `.venv/bin/python -m reports.catalog --markdown > docs/metrics.md`"


def test_a_run_measures_every_figure_declared(analysis):
    columns = {key for row in analysis.series for key in row}
    assert [f.name for f in catalog.series() if f.name not in columns] == []
    assert set(history.values(analysis)) == {f.name for f in catalog.tracked()} | set(
        catalog.percentiles(catalog.tracked()))
    table = tables.series_table(analysis.series)
    assert table.columns[0] == "Participants" and "Recv jitter (ms)" in table.columns


def test_a_table_plot_or_comparison_that_shows_an_undeclared_column_fails(analysis, tmp_path, monkeypatch):
    # Every table, plot and comparison of a run is built from the catalogue's entries ...
    run.build(analysis.run.path)
    compare.build([analysis.run.path, analysis.run.path], tmp_path / "cmp", force=True)
    shown = json.loads((analysis.run.path / "tables.json").read_text())["tables"]
    assert {"series", "cost", "traffic", "health", "clients", "checks"} <= set(shown)
    assert Table("t", "t", [Column("recv_bps", brief=True), Column("fps", of="janus")], []).columns == \
        ["Received (Mbps)", "janus: Recv fps"]
    # ... and one column added on purpose, to a table, a plot or a comparison, is refused
    with pytest.raises(UndeclaredColumn, match="'jitter_p42'"):
        Table("t", "t", ["participants", "jitter_p42"], [])
    cost_table = tables.cost_table
    monkeypatch.setattr(tables, "cost_table", lambda cost: Table("cost", "", [*cost_table(cost).keys, "sfu_cost"], []))
    with pytest.raises(UndeclaredColumn, match="'sfu_cost'"):
        run.build(analysis.run.path)
    monkeypatch.undo()
    with pytest.raises(UndeclaredColumn, match="'frames_dropped'"):
        runfigures._panels(analysis, tmp_path, "x", [Panel("fps"), Panel("frames_dropped", "server")], "a plot")
    monkeypatch.setattr(compare, "REPEAT", (*compare.REPEAT, "mos"))
    with pytest.raises(UndeclaredColumn, match="'mos'"):
        compare.build([analysis.run.path, analysis.run.path], tmp_path / "cmp", force=True)
