"""The simulcast part of a run's report (reports/layers.py), on generated run folders whose browsers
received pictures of the heights the test sets."""
import json

from reports import layers, run as run_report, windows

from support import fakerun


def _received(run_dir, fields_of):
    """Rewrites the received video samples' fields to those fields_of(sample) returns."""
    path = run_dir / "samples.jsonl"
    out = []
    for line in path.read_text().splitlines():
        s = json.loads(line)
        if s["kind"] == "video" and s["direction"] == "recv":
            s.update(fields_of(s))
        out.append(json.dumps(s))
    path.write_text("\n".join(out) + "\n")


def test_layer_of_names_the_nearest_layer():
    assert [layers.layer_of(h, 540) for h in (540, 480, 270, 200, 135, 90)] == \
        ["full", "full", "1/2", "1/2", "1/4", "1/4"]
    assert layers.layer_of(None, 540) is None and layers.layer_of(270, None) is None


def test_a_simulcast_run_reports_each_receivers_layers_and_switches(tmp_path):
    d = fakerun.make_run(tmp_path, rooms=2, seed=4, config={"simulcast": 3})
    t_switch = {}

    def fields(s):
        # r1u1 gets r1u2's quarter layer from the second room on, everyone else the full picture;
        # its decoder asks for two keyframes and freezes once as the switch lands, then asks once more
        # long after; r1u3's stream asks for one keyframe with no switch at all
        if s["user"] == "r1u1" and s["peer"] == "r1u2" and s["participants"] >= 14:
            since = s["t"] - t_switch.setdefault("down", s["t"])
            return {"frameHeight": 90, "pliCount": 2 if since < 4000 else 3, "freezeCount": 1}
        if s["user"] == "r1u1" and s["peer"] == "r1u3":
            return {"frameHeight": 360, "pliCount": 0 if s["participants"] < 14 else 1, "freezeCount": 0}
        return {"frameHeight": 360, "pliCount": 0, "freezeCount": 0}
    _received(d, fields)
    run_report.build(d)
    tables = json.loads((d / "tables.json").read_text())["tables"]

    rows = {(r[0], r[1], r[2]): r for r in tables["layers"]["rows"]}
    assert rows[(7, "recv", "full")][5] == 100.0          # share of streams at 7 participants
    quarter = rows[(14, "recv", "1/4")]
    assert quarter[3] == "90" and quarter[4] >= 1           # height, streams
    assert rows[(14, "recv", "full")][5] < 100.0

    switches = {(r[0], r[1]): r for r in tables["layer_switches"]["rows"]}
    # keyframe requests over its life, within 5 s of a switch, freezes within 5 s of one
    assert switches[("r1u1", "r1u2")][3:] == [1, "full", "1/4", 3, 2, 1]
    assert switches[("r1u1", "r1u3")][3:] == [0, "full", "full", 1, 0, 0]
    page = (d / "report.html").read_text()
    assert "Simulcast: 3 layers per browser publisher" in page and (d / "report-layers.png").stat().st_size > 5000
    assert "simulcast: 3 VP8 layers" in page   # the scenario line names the layering


def test_captured_frames_are_scored_by_the_layer_they_came_from(tmp_path):
    """quality.jsonl's frames grouped by their own height: VMAF as a tile shows them and at the
    layer's size, side by side per participant count."""
    d = fakerun.make_run(tmp_path, rooms=2, seed=6, config={"simulcast": 3})
    path = d / "quality.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    for i, r in enumerate(recs):
        quarter = i % 2 == 1
        r.update(width=135 if quarter else 540, height=90 if quarter else 360,
                 vmaf=40.0 if quarter else 90.0, vmaf_layer=80.0 if quarter else 90.0)
    recs[0].pop("height")                  # a frame scored before sizes were recorded: no layer
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run_report.build(d)
    table = json.loads((d / "tables.json").read_text())["tables"]["layer_quality"]
    rows = {(r[0], r[1]): r for r in table["rows"]}
    assert {layer for _, layer in rows} == {"full", "1/4"}
    assert sum(r[3] for r in rows.values()) == len(recs) - 1
    counts = sorted({p for p, _ in rows})
    quarter, full = rows[(counts[-1], "1/4")], rows[(counts[-1], "full")]
    assert quarter[2] == "90" and quarter[4:6] == [40.0, 80.0] and full[4:6] == [90.0, 90.0]
    assert "Quality by simulcast layer" in (d / "report.html").read_text()


def test_keyframe_requests_are_per_stream_minute_of_each_layer():
    """The PLIs each sent layer got (an SFU asking for its receivers) and each received stream sent,
    over the windows' own lengths."""
    def obs(direction, height, plis, dt=10.0):
        first = {"t": 1000, "participants": 7, "direction": direction, "kind": "video", "frameHeight": height,
                 "bytes": 0, "packets": 0, "pliCount": 5 if plis is not None else None}
        last = dict(first, t=1000 + dt * 1000, bytes=125_000 * dt, packets=100 * dt,
                    pliCount=5 + plis if plis is not None else None)
        return windows._observe(first, last, [first, last], "ramp", 1)
    table = layers.layer_table([obs("send", 540, 3), obs("send", 540, 1, dt=20.0), obs("send", 135, 0),
                                obs("recv", 540, None), obs("recv", 540, 2)], 540)
    rate = {(r[1], r[2]): r[9] for r in table.rows}
    assert table.columns[9] == "Keyframe requests / stream-min"
    assert rate == {("send", "full"): 8.0, ("send", "1/4"): 0.0, ("recv", "full"): 12.0}


def test_a_run_of_one_layer_has_no_layer_section(tmp_path):
    d = fakerun.make_run(tmp_path, rooms=1, seed=5)
    run_report.build(d)
    assert "layers" not in json.loads((d / "tables.json").read_text())["tables"]
    assert not (d / "report-layers.png").exists() and "Simulcast" not in (d / "report.html").read_text()


def test_a_study_of_layered_runs_says_which_layer_each_sfus_receivers_got(tmp_path):
    """The study's comparison (reports/study.py) has the layer receivers got per SFU, its runs pooled,
    where the runs published layers (simulcast or SVC); a study of one layer has no such table."""
    from reports import metrics, runfiles, study as study_report
    from reports.study import Entry

    def run(sfu, height, **config):
        d = fakerun.make_run(tmp_path / sfu, rooms=2, seed=4, sfu=sfu, config=config)
        _received(d, lambda s: {"frameHeight": height})
        return metrics.analyse(runfiles.load(d))

    entries = [Entry("inhouse", [run("inhouse", 90, simulcast=3, svc=True)], 1),
               Entry("mediasoup", [run("mediasoup", 360, simulcast=3, svc=True)], 1)]
    _, _ = study_report.build(entries, tmp_path / "study")
    got = json.loads((tmp_path / "study" / "tables.json").read_text())["tables"]["study-layers"]
    assert [(r[0], r[1], r[2], r[4]) for r in got["rows"]] == [("inhouse", "1/4", "90", 100.0),
                                                               ("mediasoup", "full", "360", 100.0)]
    assert 'id="table-study-layers"' in (tmp_path / "study" / "report.html").read_text()
    plain = [Entry("janus", [run("janus", 360)], 1)]
    study_report.build(plain, tmp_path / "plain")
    assert "study-layers" not in json.loads((tmp_path / "plain" / "tables.json").read_text())["tables"]
