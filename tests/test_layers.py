"""The simulcast part of a run's report (reports/layers.py), on generated run folders whose browsers
received pictures of the heights the test sets."""
import json

from reports import layers, run as run_report, synthetic


def _received_heights(run_dir, height_of):
    """Rewrites the received video samples' frameHeight to height_of(sample)."""
    path = run_dir / "samples.jsonl"
    out = []
    for line in path.read_text().splitlines():
        s = json.loads(line)
        if s["kind"] == "video" and s["direction"] == "recv":
            s["frameHeight"] = height_of(s)
        out.append(json.dumps(s))
    path.write_text("\n".join(out) + "\n")


def test_layer_of_names_the_nearest_layer():
    assert [layers.layer_of(h, 540) for h in (540, 480, 270, 200, 135, 90)] == \
        ["full", "full", "1/2", "1/2", "1/4", "1/4"]
    assert layers.layer_of(None, 540) is None and layers.layer_of(270, None) is None


def test_a_simulcast_run_reports_each_receivers_layers_and_switches(tmp_path):
    d = synthetic.make_run(tmp_path, rooms=2, seed=4, config={"simulcast": 3})
    t_switch = {}

    def height(s):
        # r1u1 gets r1u2's quarter layer from the second room on, everyone else the full picture
        if s["user"] == "r1u1" and s["peer"] == "r1u2" and s["participants"] >= 14:
            t_switch.setdefault("down", s["t"])
            return 90
        return 360
    _received_heights(d, height)
    run_report.build(d)
    tables = json.loads((d / "tables.json").read_text())["tables"]

    rows = {(r[0], r[1], r[2]): r for r in tables["layers"]["rows"]}
    assert rows[(7, "recv", "full")][5] == 100.0          # share of streams at 7 participants
    quarter = rows[(14, "recv", "1/4")]
    assert quarter[3] == "90" and quarter[4] >= 1           # height, streams
    assert rows[(14, "recv", "full")][5] < 100.0

    switches = {(r[0], r[1]): r for r in tables["layer_switches"]["rows"]}
    assert switches[("r1u1", "r1u2")][3:] == [1, "full", "1/4"]
    assert switches[("r1u1", "r1u3")][3:] == [0, "full", "full"]
    page = (d / "report.html").read_text()
    assert "Simulcast: 3 layers per browser publisher" in page and (d / "report-layers.png").stat().st_size > 5000
    assert "simulcast: 3 VP8 layers" in page   # the scenario line names the layering


def test_a_run_of_one_layer_has_no_layer_section(tmp_path):
    d = synthetic.make_run(tmp_path, rooms=1, seed=5)
    run_report.build(d)
    assert "layers" not in json.loads((d / "tables.json").read_text())["tables"]
    assert not (d / "report-layers.png").exists() and "Simulcast" not in (d / "report.html").read_text()
