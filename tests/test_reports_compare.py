import json
from pathlib import Path

import pytest

from reports import compare, metrics, runfiles, verify
from reports.knee import Knee

from support import fakerun

HOUR = 3_600_000


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    parent = tmp_path_factory.mktemp("runs")

    def make(sfu, i, **kw):
        return fakerun.make_run(parent, sfu=sfu, seed=i, rooms=6, start_ms=1_760_000_000_000 + i * HOUR, **kw)

    return {
        "janus": make("janus", 0, knee=28),
        "mediasoup": make("mediasoup", 1, server=False,
                          config={"sfu_options": "bitrate=2000000", "grid_url": "http://grid:4444"}),
        "medooze": make("medooze", 2, knee=21, reference=False, config={"out": "elsewhere", "cache": "/c"}),
        "small": make("pion", 3, config={"rooms": 4}),
        "light-media": make("livekit", 4, config={"media": "local"}),
    }


def test_comparison_renders_with_ranking_and_overlays(runs, tmp_path):
    out = tmp_path / "cmp"
    path = compare.build([runs["janus"], runs["mediasoup"], runs["medooze"]], out)
    assert path == out / "compare.html"
    problems = verify.check_rendered(path, expect=compare.FIGURES + ("table-ranking", "table-cmp-table4",
                                                                     "table-cmp-table5", "table-cmp-table6",
                                                                     "table-versions", "table-study2018"),
                                     screenshot=out / "report.png")
    assert problems == []
    doc = json.loads((out / "tables.json").read_text())
    ranking = doc["tables"]["ranking"]["rows"]
    assert [row[1] for row in ranking] == ["mediasoup 1.1.2", "janus 1.1.2", "medooze 1.1.2"]
    assert [row[2] for row in ranking] == ["none", 35, 28]
    assert (out / "table-ranking.csv").exists()
    cost = doc["tables"]["cmp-cost"]
    assert cost["columns"][1:4] == ["janus 1.1.2: µs per forwarded packet", "janus 1.1.2: MHz per forwarded stream",
                                    "janus 1.1.2: MHz per published stream"]
    # the run without server.jsonl has no cost; the others have one at every count they measured
    assert cost["rows"] and all(row[4] is None and row[1] is not None for row in cost["rows"][:3]), cost["rows"]
    page = path.read_text()
    assert "mediasoup 1.1.2: not measured — server.jsonl missing" in page


def test_ranking_prefers_the_load_coped_with():
    a = [metrics.analyse(runfiles.Run(path=Path(f"/x/2025-{n}"))) for n in "abcd"]
    for an, (knee, reached, recv) in zip(a, [(None, 14, 2e6), (35, 49, 1e6), (None, 49, 1.5e6), (21, 49, 3e6)]):
        an.knee = Knee(participants=knee)
        an.series = [{"participants": p} for p in range(7, reached + 1, 7)]
        an.headline.update(participants=reached, recv_bps=recv)
    assert [compare.coped(an) for an in a] == [14, 28, 49, 14]
    assert compare.ranked(a) == [2, 1, 3, 0]   # 3 and 0 both coped with 14: bitrate decides


@pytest.mark.parametrize("other,field", [("small", "rooms: 6 / 4"), ("light-media", "media: paper / local")])
def test_refuses_different_scenarios(runs, tmp_path, other, field):
    with pytest.raises(compare.ScenarioMismatch) as err:
        compare.build([runs["janus"], runs[other]], tmp_path / "cmp")
    assert isinstance(err.value, ValueError)
    message = str(err.value)
    assert "\n" not in message and field in message and "force" in message
    assert not (tmp_path / "cmp").exists()


def test_force_compares_anyway_and_says_so(runs, tmp_path):
    path = compare.build([runs["janus"], runs["small"]], tmp_path / "cmp", force=True)
    assert "Compared with force although the scenarios differ: rooms: 6 / 4" in path.read_text()


def test_refuses_runs_without_recorded_config(runs, tmp_path):
    bare = tmp_path / "20250101T000000Z-bare"
    bare.mkdir()
    (bare / "events.jsonl").write_text((runs["janus"] / "events.jsonl").read_text())
    with pytest.raises(compare.ScenarioMismatch, match="no config recorded for 20250101T000000Z-bare"):
        compare.build([runs["janus"], bare], tmp_path / "cmp")


def test_the_recorded_scenario_decides_what_must_match():
    a = {"config": {"sfu": "janus", "rooms": 70, "out": "runs"}, "scenario": {"rooms": 70, "media": "paper"}}
    b = {"config": {"sfu": "medooze", "rooms": 70, "out": "x"}, "scenario": {"rooms": 70, "media": "paper"}}
    assert compare.scenario(a) == {"rooms": 70, "media": "paper"}
    assert compare.scenario_differences([a, b]) == []
    c = dict(b, scenario={"rooms": 70, "media": "paper", "users_per_room": 4})
    assert compare.scenario_differences([a, c]) == ["users_per_room: (unset) / 4"]
    # A run that recorded no scenario must match on its whole config.
    assert compare.scenario({"config": {"rooms": 1, "out": "runs"}, "scenario": None}) == {"rooms": 1,
                                                                                           "out": "runs"}


def test_a_run_from_before_a_setting_existed_matches_one_at_its_default():
    old = {"config": {}, "scenario": {"rooms": 2, "media": "local"}}
    new = {"config": {}, "scenario": {"rooms": 2, "media": "local", "network": "none"},
           "scenario_defaults": {"rooms": 1, "media": "local", "network": "none"}}
    assert compare.scenario_differences([old, new]) == []
    degraded = dict(new, scenario=dict(new["scenario"], network="3g"))
    assert compare.scenario_differences([old, degraded]) == ["network: (unset) / 3g"]
    assert compare.scenario_differences([dict(old, scenario={"rooms": 3, "media": "local"}), new]) == ["rooms: 3 / 2"]


def test_the_engine_records_only_scenario_settings_as_the_scenario():
    from sfubench import config

    cfg = config.load(cli={"sfu": "inhouse", "out": "elsewhere", "client_cpus": 1.4, "rooms": 3}, env={})
    assert cfg.scenario()["rooms"] == 3
    assert not {"sfu", "out", "client_cpus", "cache", "lab_prefix"} & set(cfg.scenario())
    assert set(cfg.scenario_defaults()) == set(cfg.scenario()) and cfg.scenario_defaults()["rooms"] == 1


def test_same_sfu_twice_gets_distinct_labels(runs, tmp_path):
    again = fakerun.make_run(tmp_path, rooms=6, start_ms=1_770_000_000_000)
    path = compare.build([runs["janus"], again, again], tmp_path / "cmp")
    doc = json.loads((tmp_path / "cmp" / "tables.json").read_text())
    assert list(doc["runs"]) == [f"janus 1.1.2 ({runs['janus'].name})", f"janus 1.1.2 ({again.name}) #1",
                                 f"janus 1.1.2 ({again.name}) #2"]
    assert f"janus 1.1.2 ({runs['janus'].name})" in path.read_text()
    # Three runs of one SFU: how far they spread, so a reader knows what difference is noise.
    [row] = doc["tables"]["repeat"]["rows"]
    assert row[:3] == ["janus 1.1.2", 3, "35 / none / none"], row
    received = [r["headline"]["recv_bps"] for r in doc["runs"].values()]
    mean = sum(received) / 3
    assert row[3] == round(100 * (max(received) - min(received)) / mean, 1)
    assert "Repeated runs of the same SFU differed by up to" in path.read_text()


def test_nothing_to_compare(tmp_path):
    with pytest.raises(ValueError, match="nothing to compare"):
        compare.build([], tmp_path)


def test_sfus_run_more_than_once_differ_only_beyond_their_noise(tmp_path):
    """Two SFUs with two runs each: one whose knees part from the other's is ahead, with the interval
    that says so; one whose knees mix with the other's is level."""
    def make(sfu, i, knee):
        return fakerun.make_run(tmp_path, sfu=sfu, seed=i, rooms=8, knee=knee, start_ms=1_760_000_000_000 + i * HOUR)
    high = [make("inhouse", 0, 42), make("inhouse", 1, 49)]
    low = [make("janus", 2, 28), make("janus", 3, 35)]
    mixed = [make("mediasoup", 4, 28), make("mediasoup", 5, 35)]
    compare.build(high + low + mixed, tmp_path / "cmp")
    words = json.loads((tmp_path / "cmp" / "tables.json").read_text())["differences"]
    ahead = [w for w in words if w.startswith("inhouse 1.1.2's load coped with is higher than")]
    assert ahead and "95% interval of the difference" in ahead[0], words
    assert any("level at this resolution" in w and "janus" in w and "mediasoup" in w for w in words), words
    assert "level at this resolution" in (tmp_path / "cmp" / "compare.html").read_text()
