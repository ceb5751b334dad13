"""The study's comparison on generated run folders: each SFU's knee over its repeats, ranks only where
the repeats' ranges part, level otherwise, client-bound runs never ranked, an SFU without runs a row
that says why, the 2018 study's figures beside ours, and the page legible in Chromium."""
import json

import pytest

from reports import metrics, reference, runfiles, verify
from reports import study as study_report
from reports.confidence import Span
from reports.study import Entry
from sfubench.cloud import terraform

from support import fakerun

HOUR = 3_600_000


@pytest.fixture(scope="module")
def entries(tmp_path_factory):
    parent = tmp_path_factory.mktemp("runs")
    seed = iter(range(100))

    def run(sfu, **kw):
        i = next(seed)
        return metrics.analyse(runfiles.load(fakerun.make_run(
            parent, sfu=sfu, seed=i, rooms=8, start_ms=1_760_000_000_000 + i * HOUR, **kw)))

    budget = {"sfu_cpus": 0.25}
    return [Entry("inhouse", [run("inhouse", knee=42, config=budget), run("inhouse", knee=42, config=budget)], 2),
            Entry("janus", [run("janus", knee=21), run("janus", knee=28)], 2),
            Entry("mediasoup", [run("mediasoup", knee=21), run("mediasoup", knee=28)], 2,
                  version="3.13.16", released="2024-01-10"),
            Entry("livekit", [run("livekit", client_bound_after=14), run("livekit", client_bound_after=14)], 2),
            Entry("medooze", [], 2, ["repeat 1: failed: installing medooze failed: npm ERR! 404"]),
            Entry("jitsi", [], 0, ["runs in the cloud only: make cloud-loadtest SFU=jitsi"])]


@pytest.fixture(scope="module")
def built(entries, tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    path, results = study_report.build(entries, out, offer=terraform.offer("aws"))
    return out, path, results


def test_spans_rank_only_where_the_bootstrap_interval_leaves_out_zero():
    a, b, c = Span((42, 42)), Span((28, 35)), Span((35, 42))
    assert study_report.ranks({"a": a, "b": b, "c": c, "none": None}) == {"a": 1, "b": 2, "c": 1}
    assert study_report.ranks({"a": Span((49, 56)), "b": Span((28, 35)), "c": Span((35, 42))}) == \
        {"a": 1, "b": 2, "c": 2}
    # a run without a knee bounds it from below: nothing ranks above it
    assert study_report.ranks({"open": Span((70,), open_above=True), "b": Span((63, 70))}) == {"open": 1, "b": 1}
    # costs: lower is better
    assert study_report.ranks({"x": Span((9.0, 10.0)), "y": Span((14.0, 16.0))}, higher_is_better=False) == \
        {"x": 1, "y": 2}
    assert Span((28, 35)).text() == "31.5 (28–35)" and Span((70,), True).text() == "> 70"


def test_a_run_that_stopped_on_a_knee_its_target_takes_back_counts_that_knee_not_a_lower_bound():
    """LiveKit here, 2026-11-26: the ramp stopped on a knee at 21 (28 bad too); with the target's
    windows pooled in, 28 read 0.97 freezes a stream-minute, under the rule. The run measured nothing
    beyond 28, so it cannot say the knee is above it."""
    from types import SimpleNamespace
    from reports.knee import Knee
    stopped = SimpleNamespace(knee=Knee(detail="taken back", stopped_on=21), headline={"participants": 28})
    confirmed = SimpleNamespace(knee=Knee(21, "freezes"), headline={"participants": 28})
    span = study_report.knee_span(Entry("livekit", [confirmed, stopped], 2))
    assert span == Span((21, 21)) and not span.open_above
    # a run with no knee that reached 28 says the knee lies above 28: narrowed down to the
    # participant, it could be 29 as well as the next room's 35
    none = SimpleNamespace(knee=Knee(), headline={"participants": 28}, ident={"config": {"users_per_room": 7}})
    span = study_report.knee_span(Entry("livekit", [confirmed, none], 2))
    assert span == Span((21, 28), open_above=True)


def test_the_record_has_each_sfus_knee_spread_and_cost(built, entries):
    _, _, results = built
    assert results["inhouse"]["knee"] == {"median": 49, "min": 49, "max": 49, "spread": 0, "open_above": False}
    janus = results["janus"]["knee"]
    assert janus["spread"] == janus["max"] - janus["min"] > 0
    assert results["inhouse"]["rank"] == 1 and results["janus"]["rank"] == results["mediasoup"]["rank"] == 2
    # client-bound runs measure the clients: no knee, no rank
    assert results["livekit"]["knee"] is None and results["livekit"]["rank"] is None
    assert results["livekit"]["client_bound"] == [True, True]
    assert results["inhouse"]["unconfirmed"] == [False, False]
    assert results["medooze"]["runs"] == [] and "npm ERR" in results["medooze"]["why"][0]
    load = results["janus"]["cost"]["participants"]
    assert load and load < min(results["janus"]["knees"]) and results["janus"]["cost"]["us_per_packet"]["median"] > 0
    # what was compared: each SFU's version and when it was released
    assert (results["mediasoup"]["version"], results["mediasoup"]["released"]) == ("3.13.16", "2024-01-10")


def test_the_words_follow_the_intervals(built):
    out, _, _ = built
    words = json.loads((out / "tables.json").read_text())["verdicts"]
    assert any(w.startswith("inhouse's knee is higher than") for w in words), words
    level = [w for w in words if "level at this resolution" in w and "janus" in w and "mediasoup" in w]
    assert level and "the 95% interval of the difference" in level[0] and "holds 0" in level[0], words
    ahead = [w for w in words if w.startswith("inhouse's knee is higher than")][0]
    assert "95% interval of the difference" in ahead, ahead


def test_every_sfu_is_a_row_and_the_2018_figures_stand_beside(built):
    out, _, _ = built
    knees = json.loads((out / "tables.json").read_text())["tables"]["knees"]
    sfus = [row[1] for row in knees["rows"]]
    assert sfus[:6] == ["inhouse", "janus", "mediasoup", "livekit", "medooze", "jitsi"] or \
        set(sfus[:6]) == {"inhouse", "janus", "mediasoup", "livekit", "medooze", "jitsi"}
    notes = {row[1]: row[-1] for row in knees["rows"]}
    versions = {row[1]: row[knees["columns"].index("SFU version")] for row in knees["rows"]}
    assert versions["mediasoup"] == "3.13.16 (2024-01-10)" and versions["janus"] is None
    assert "cloud only" in notes["jitsi"] and "every run client-bound" in notes["livekit"]
    assert "Janus 0.4.3 (2018 study)" in sfus and reference.of("janus")["knee"] == 270
    table4 = json.loads((out / "tables.json").read_text())["tables"]["cmp-table4"]
    ref = next(r for r in table4["rows"] if r[0] == "Janus 0.4.3 (2018)")
    assert ref[table4["columns"].index("Sent avg (Mbps)")] == 1.65
    assert ref[table4["columns"].index("Sender RTT > 50 ms (%)")] == 27.8


def test_the_page_renders_with_its_curves_and_tables(built):
    out, path, _ = built
    problems = verify.check_rendered(path, expect=study_report.FIGURES + study_report.TABLES,
                                     screenshot=out / "report.png")
    assert problems == []
    page = path.read_text()
    assert "SFU study — 6 SFUs, 2 repeats each" in page and "level at this resolution" in page


def test_a_run_that_coped_with_no_count_leaves_the_others_costs(entries, tmp_path):
    """A run that coped with no count (its knee at its first, or its clients the limit from the
    first room) has no cost, and the other SFUs' costs still compare at the load they all coped with."""
    at_once = metrics.analyse(runfiles.load(fakerun.make_run(
        tmp_path, sfu="livekit", seed=99, rooms=4, client_bound_after=0, start_ms=1_760_000_000_000)))
    assert at_once.cost and not study_report.coped(at_once)
    measured = [e for e in entries if e.analyses] + [Entry("weak", [at_once], 1)]
    load = study_report.common_load(measured)
    assert load == study_report.common_load([e for e in entries if e.analyses]) and load
    assert study_report.cost_span(measured[-1], load, "sfu_us_per_packet") is None
    assert study_report.cost_span(measured[0], load, "sfu_us_per_packet") is not None


def test_each_sfu_is_priced_per_participant_hour_on_the_clouds_instances(built):
    """The in-house SFU's knee, 49 in both runs on 0.25 core, is 196 participants per vCPU: on a
    c5.large (2 vCPUs, $0.085 an hour) a participant-hour costs 0.085 / 392 dollars."""
    out, _, results = built
    priced = results["inhouse"]["price"]
    assert priced["participants_per_vcpu"] == {"median": 196, "min": 196, "max": 196}
    c5 = priced["usd_per_1000_participant_hours"]["c5.large"]
    assert abs(c5["median"] - 1000 * 0.085 / 392) < 1e-9 and c5["min"] == c5["max"] == c5["median"]
    # no budget recorded, no price; client-bound runs have no knee to price
    assert results["janus"]["price"] is None and results["livekit"]["price"] is None
    tables = json.loads((out / "tables.json").read_text())
    assert tables["prices"]["source"] == terraform.offer("aws")["source"] and tables["prices"]["cloud"] == "aws"
    assert "tuned profiles" in tables["prices"]["assumption"]
    table = tables["tables"]["study-price"]
    row = next(r for r in table["rows"] if r[0] == "inhouse")
    assert row[table["columns"].index("Participants per vCPU")] == "196"
    assert row[table["columns"].index("USD per 1,000 participant-hours on c5.large")] == "0.217"


def test_a_knee_not_reached_prices_a_participant_hour_from_above():
    from reports import price
    bound = price.hourly(Span((70, 140), open_above=True), 0.085, 2)
    assert bound["median"] is None and abs(bound["at_most"] - 1000 * 0.085 / (2 * 70)) < 1e-9
    assert price.cell(bound) == "< 0.607"
    both = price.hourly(Span((100, 200)), 0.085, 2)
    assert price.cell(both) == "0.319 (0.212–0.425)"
