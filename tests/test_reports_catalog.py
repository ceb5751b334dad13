"""The metric catalogue (reports/catalog.py) is the one place a metric is declared: the report's
measurements table, the results database, the trend, Prometheus's names, the Grafana dashboard and
the docs all name only what it declares, and a run's analysis measures every figure it declares."""
import json
import re
from pathlib import Path

import pytest

from reports import catalog, history, metrics, prometheus, runfiles, tables

from support import fakerun

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    run = fakerun.make_run(tmp_path_factory.mktemp("runs"), rooms=4, knee=21, seed=3)
    return metrics.analyse(runfiles.load(run))


def test_every_place_names_only_what_the_catalogue_declares():
    names = {f.name for f in catalog.FIGURES}
    assert len(names) == len(catalog.FIGURES), "a figure is declared twice"
    assert {c[0] for c in tables.SERIES_COLUMNS} <= names
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
