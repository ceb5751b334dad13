import csv
import json
import lzma
import shutil
from pathlib import Path
from unittest.mock import ANY

import pytest

from reports import run, verify

from support import fakerun


@pytest.fixture(scope="module")
def browser():
    with verify.browser() as driver:
        yield driver


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    parent = tmp_path_factory.mktemp("runs")
    return {
        "full": fakerun.make_run(parent, rooms=8, knee=35, background_interval_s=20, name="full-janus"),
        "crashed": fakerun.make_run(parent, rooms=8, crash_after_room=3, name="crashed-janus"),
        "no-reference": fakerun.make_run(parent, rooms=3, reference=False, server=False, name="noref-pion",
                                           sfu="pion"),
    }


@pytest.fixture(scope="module")
def full_report(runs):
    return run.build(runs["full"])


def test_full_run_renders_every_figure_and_table(runs, full_report, browser):
    d, path = runs["full"], full_report
    assert path == d / "report.html"
    tables = ("table-table4", "table-table5", "table-table6", "table-checks", "table-series", "table-meta",
              "table-config")
    problems = verify.check_rendered(path, expect=run.FIGURES + tables, screenshot=d / "report.png", driver=browser)
    assert problems == []
    assert (d / "report.png").stat().st_size > 50_000
    page = path.read_text()
    assert "Knee at 42 participants" in page
    assert "janus 1.1.2" in page and "156.0.8078.79" in page and "3f2c1a9e0b7d" in page
    assert "not measured" not in page


def test_report_opens_from_disk_without_network(full_report):
    page = full_report.read_text()
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_tables_are_exported_next_to_the_report(runs, full_report):
    d = runs["full"]
    doc = json.loads((d / "tables.json").read_text())
    assert set(doc["tables"]) == {"table4", "table5", "table6", "checks", "first_video", "storms", "restart", "viewers", "series", "percentiles", "health", "cost",
                                  "traffic", "clients", "network", "codecs", "audio"}
    assert doc["headline"]["knee"] == 42 and "knee_rule" in doc and "audio_knee_rule" in doc
    # the generated run's browsers sent and received VP8 video alone
    assert doc["tables"]["codecs"]["rows"] == [["send", "vp8", ANY, 100.0], ["recv", "vp8", ANY, 100.0]]
    with open(d / "table-table6.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0][:3] == ["Metric", "Unit", "n"]
    assert rows[1][0] == "Video bitrate sent, per stream"
    assert len(rows) == 1 + 7
    with open(d / "table-series.csv") as f:
        series = list(csv.reader(f))
    assert len(series) == 1 + 8
    # each per-stream figure's percentiles at each count: the series' mean beside them, p50 <= p99 <= max
    with open(d / "table-percentiles.csv") as f:
        pct = list(csv.DictReader(f))
    fps = [r for r in pct if r["Figure"] == "Recv fps"]
    assert [int(r["Participants"]) for r in fps] == [int(float(row[0])) for row in series[1:]]
    column = series[0].index("Recv fps")
    assert [float(r["Mean"]) for r in fps] == [float(row[column]) for row in series[1:]]
    assert all(float(r["p50"]) <= float(r["p99"]) <= float(r["max"]) for r in pct if r["p50"]), pct[:3]


def test_crashed_run_renders_what_is_there(runs, browser):
    d = runs["crashed"]
    path = run.build(d)
    problems = verify.check_rendered(path, expect=("fig-timeline", "fig-bitrate", "fig-rtt", "fig-checks"),
                                     screenshot=d / "report.png", driver=browser)
    assert problems == []
    page = path.read_text()
    assert "did not finish" in page
    assert "unreadable line skipped" in page
    assert "quality.jsonl missing" in page and "server.jsonl missing" in page
    assert "Server CPU and memory: not measured" in page
    assert "Target load was never measured" in page


def test_run_without_reference_or_server(runs, browser):
    d = runs["no-reference"]
    problems = verify.check_rendered(run.build(d), expect=("fig-quality", "fig-server-missing"), driver=browser)
    assert problems == []
    assert "VMAF / PSNR / SSIM: not measured" in (d / "report.html").read_text()


@pytest.mark.parametrize("keep", [(), ("meta.json",), ("meta.json", "events.jsonl"), ("samples.jsonl",)])
def test_partial_folders_still_render(runs, tmp_path, keep, browser):
    d = tmp_path / "20250101T000000Z-partial"
    d.mkdir()
    for name in keep:
        shutil.copy(runs["full"] / name, d / name)
    path = run.build(d)
    assert verify.check_rendered(path, driver=browser) == []
    assert "partial" in path.read_text()


def test_implausible_quality_values_are_called_out(runs, tmp_path):
    d = shutil.copytree(runs["no-reference"], tmp_path / "run")
    records = [json.loads(line) for line in (d / "quality.jsonl").read_text().splitlines()]
    for r in records[:3]:
        r.update(brisque=0.0)
    (d / "quality.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    page = run.build(d).read_text()
    assert f"BRISQUE is 0 for 3 of {len(records)} scored frames" in page


def test_rebuild_removes_figures_that_no_longer_have_data(runs, tmp_path):
    d = shutil.copytree(runs["full"], tmp_path / "run")
    run.build(d)
    assert (d / "report-server.png").exists()
    (d / "server.jsonl").unlink()
    run.build(d)
    assert not (d / "report-server.png").exists()


def test_check_rendered_reports_broken_pages(tmp_path, browser):
    page = tmp_path / "broken.html"
    page.write_text('<html><head><title>x</title></head><body><img src="nope.png" alt="gone">'
                    '<table id="table-empty"><thead><tr><th>a</th></tr></thead><tbody></tbody></table>'
                    '<table><tbody><tr><td>—</td></tr></tbody></table>'
                    '<a href="https://example.org/">out</a></body></html>')
    problems = verify.check_rendered(page, expect=("fig-bitrate",), driver=browser)
    text = "\n".join(problems)
    assert "image nope.png (gone) did not load" in text
    assert "table table-empty has no rows" in text
    assert "has only empty cells" in text
    assert "element #fig-bitrate is missing" in text
    assert "external reference https://example.org/" in text
    assert verify.check_rendered(tmp_path / "absent.html") == [f"{tmp_path / 'absent.html'} does not exist"]


def test_main(runs, capsys):
    assert run.main([str(runs["no-reference"])]) == 0
    assert capsys.readouterr().out.strip().endswith("report.html")
    assert run.main([]) == 2


def test_a_run_without_a_knee_says_why_its_load_stopped(runs, tmp_path):
    d = shutil.copytree(runs["no-reference"], tmp_path / "run")
    events = [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines()]
    for e in events:
        if e["event"] == "target_reached":
            e["reason"] = "no knee confirmed within --ramp-minutes 8 (up to 21 participants)"
    (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    page = run.build(d).read_text()
    assert ("<b>No knee</b>: the SFU coped with every load measured; the load stopped: no knee confirmed "
            "within --ramp-minutes 8 (up to 21 participants).") in page


STORED = Path(__file__).parent / "data" / "default-run"


def _unpacked(folder: Path, into: Path) -> Path:
    into.mkdir()
    for f in folder.iterdir():
        if f.suffix == ".xz":
            (into / f.stem).write_bytes(lzma.decompress(f.read_bytes()))
        elif f.name != "tables-before.json":
            shutil.copy(f, into / f.name)
    return into


def _same(before, after, where="tables.json"):
    """Every value of `before` is in `after`, the same; `after` may hold more keys."""
    if isinstance(before, dict):
        assert isinstance(after, dict), where
        for k, v in before.items():
            assert k in after, f"{where}.{k} is gone"
            _same(v, after[k], f"{where}.{k}")
    elif isinstance(before, list):
        assert isinstance(after, list) and len(after) == len(before), where
        for i, (b, a) in enumerate(zip(before, after)):
            _same(b, a, f"{where}[{i}]")
    else:
        assert before == after, f"{where}: {before!r} then, {after!r} now"


def test_a_stored_real_default_run_gives_the_figures_it_gave_before(tmp_path):
    """A real default run (tests/data/default-run/README.md says which), its files as the run left
    them but for its frames and images, and the tables.json the reports built from it before the
    catalogue gave every table its columns: rebuilt now, every number and title is the same."""
    folder = _unpacked(STORED, tmp_path / "run")
    run.build(folder)
    before = json.loads((STORED / "tables-before.json").read_text())
    after = json.loads((folder / "tables.json").read_text())
    assert before["tables"]["series"]["rows"] and before["knee"]["participants"]
    _same(before, after)


def test_the_first_video_table_counts_each_video_once_at_the_step_that_added_it():
    from reports import tables
    def check(t, user, ok, elapsed, participants):
        return {"t": t, "room": 1, "user": user, "peer": "r1u1", "ok": ok, "elapsed": elapsed,
                "participants": participants}
    checks = [check(1, "r1u1", True, 1.0, 3), check(1, "r1u2", True, 2.0, 3), check(1, "r1u3", False, 60.0, 3),
              check(2, "r1u2", True, 0.25, 5),   # checked again at the next step: not a new video there
              check(2, "r1u4", True, 3.0, 5), check(2, "r1u5", True, 5.0, 5),
              {"t": 3, "room": 1, "user": "r1u6", "peer": "r1u1", "ok": True, "elapsed": 1.0}]   # an old run's
    t = tables.first_video_table(checks)
    assert [row[:4] for row in t.rows] == [[3, 3, 1, 1.5], [5, 2, 0, 4.0]]
    assert [row[5] for row in t.rows] == [2.0, 5.0] and 1.5 < t.rows[0][4] <= 2.0
    assert t.id == "first_video" and not tables.first_video_table([]).rows
