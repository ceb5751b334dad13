"""The study, for real: `sfubench study --sfus SFU --repeat 1` runs the default scenario (the 2018
study in miniature) against an SFU and writes its comparison; its run is what `make loadtest
SFU=...` does on its own (`make test`: Janus; `make test-e2e`: the in-house SFU, which ramps
about twice as far). Each must ramp rooms of 7 to a confirmed knee or the ramp's time bound (as
the issue allows), or to a knee its target windows then take back (the study counts it, marked
unconfirmed), every step validated and measured over at least 10 s, the clients with headroom
before the knee and the browsers' checks passing there, in under 10 minutes. The clients are
confined as the default confines them: to one core, beside the SFU's. A study interrupted keeps
what it finished and goes on where it stopped."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reports import metrics, runfiles, scenario, verify
from reports import study as study_report
from sfubench import calibrate, cgroups
from sfubench.shapes.until_knee import RAMP_BOUND

from support.tiers import full, tiered

ROOT = Path(__file__).resolve().parent.parent
SFUS = tiered(("janus", "inhouse"), core=("janus",))
# Rooms measured at least: on the budget sized here (about a third of a core on a 2-core Intel VM)
# Janus's knee comes past 28 participants and the in-house SFU's near 100.
MIN_COUNTS = 5
LAB = ("--lab-prefix", "sfubq", "--lab-subnet", "127.0.10")

pytestmark = pytest.mark.e2e


def study(out: Path, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sfubench.cli", "study", "--out", str(out), *LAB, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, **kw)


@pytest.fixture(scope="module", params=SFUS)
def done(request, tmp_path_factory):
    sfu = request.param
    out = tmp_path_factory.mktemp(f"study-{sfu}")
    proc = study(out, "--sfus", sfu, "--repeat", "1")
    text = proc.communicate(timeout=1800)[0]
    return sfu, out, proc.returncode, text


@pytest.fixture(scope="module")
def analysis(done):
    sfu, out, code, text = done
    assert code == 0, text[-5000:]
    (run,) = json.loads((out / "study.json").read_text())["runs"]
    return metrics.analyse(runfiles.load(run["run_dir"]))


def test_the_default_run_ramps_rooms_of_seven_to_a_knee(done, analysis):
    _, out, _, _ = done
    a = analysis
    budget = json.loads((out / "study.json").read_text())["budget"]   # sized to this machine first
    config = a.ident["config"]
    assert (config["users_per_room"], config["shape"], config["sfu_cpus"]) == (7, "until-knee", budget["cores"])
    clients = budget["clients"]   # with headroom where they were measured, as the rule has it
    assert calibrate.FLOOR_CORES <= budget["cores"] <= 1 and calibrate.kept(clients, clients["busy"]), clients
    ramps = [w for w in a.run.windows if w["phase"] == "ramp"]
    counts = sorted({w["participants"] for w in ramps})
    rooms = [c for c in counts if c % 7 == 0]
    assert len(rooms) >= MIN_COUNTS and rooms == [7 * i for i in range(1, len(rooms) + 1)], counts
    assert all(w["duration_s"] >= 10 for w in ramps), [w["duration_s"] for w in ramps]
    knee = a.knee
    reached = next(e["reason"] for e in a.run.events if e["event"] == "target_reached")
    if reached.startswith(RAMP_BOUND):   # the bound: the SFU coped at every count its minutes reached
        assert knee.participants in (None, max(counts)) and not knee.client_bound, (knee, reached)
        limit = max(counts) + 1
    else:
        # A knee its target windows took back (an SFU's passing trouble: Janus froze 6.3 times a
        # stream-minute at 49 and the step after, then not in the target's windows at 56) is still
        # the one the run stopped on, the study counts it, marked unconfirmed. The step after is
        # now measured twice before the run stops, so that is rarer, not impossible.
        assert knee.judged is not None and not knee.client_bound, (knee, a.health)
        assert max(counts) > knee.judged, "the knee is confirmed by the step after it"
        limit = knee.judged
        if knee.participants is not None:   # confirmed: then narrowed down within its room
            room = -(-knee.participants // 7) * 7
            assert knee.participants - knee.coped <= config["knee_resolution"], (knee, counts)
            assert all(room - 7 < c < room for c in counts if c % 7), counts
    before = [h for h in a.health if h["participants"] < limit]
    assert before and not [h for h in before if h["client_bound"]], before
    browsers = [c for c in a.run.checks if c["client"] == "browser"]
    assert browsers and all(c["ok"] for c in browsers if c["room"] * 7 < limit), browsers
    assert a.run.meta["finished"] - a.run.meta["started"] < 600
    page = (a.run.path / "report.html").read_text()
    if knee.participants is not None:
        assert (f"Knee at {knee.participants} participants ({knee.coped} coped) per {budget['cores']:g} core of SFU"
                in page), knee
    elif not reached.startswith(RAMP_BOUND):
        assert f"knee at {knee.stopped_on} participants" in page and "last windows do not confirm" in page
    assert "each room settled 5 s, then measured over 10 s" in page


def test_the_study_writes_its_comparison(done, analysis):
    sfu, out, _, text = done
    record = json.loads((out / "study.json").read_text())
    assert [(r["sfu"], r["repeat"], r["status"]) for r in record["runs"]] == [(sfu, 1, "ok")]
    result = record["results"][sfu]
    knee = analysis.knee
    assert result["knee"]["median"] == knee.judged and result["knee"]["spread"] == 0
    assert result["unconfirmed"] == [knee.participants is None and knee.judged is not None]
    assert result["cost"]["mhz_per_stream"]["median"] > 0 and result["cost"]["participants"] >= 7
    assert "jitsi" not in record["results"]   # only what --sfus names
    problems = verify.check_rendered(out / "report.html", expect=study_report.FIGURES + study_report.TABLES,
                                     screenshot=out / "report.png")
    assert problems == []
    assert f"study: run 1 of 1: {sfu}, repeat 1 of 1 (about" in text
    # the budget, how it was sized and the generator's figure: on the page and in the record
    budget = record["budget"]
    assert budget["cheapest"] == sfu and budget["clients"]["streams"] > 0 and budget["rule"] == calibrate.RULE
    assert scenario.sized(budget) in (out / "report.html").read_text().replace("&#x27;", "'")


def test_a_second_run_in_the_same_folder_finds_nothing_left_to_do(done, analysis):
    sfu, out, _, _ = done
    runs = sorted((out / "runs").iterdir())
    proc = study(out, "--sfus", sfu, "--repeat", "1")
    text = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, text
    assert "nothing left to do" in text and sorted((out / "runs").iterdir()) == runs


@full
def test_an_interrupted_study_keeps_its_runs_and_goes_on(tmp_path):
    """Ctrl-C in the second run: the first stays, the second is torn down and not kept; run again,
    only the second runs. A short scenario: what is tested is the study's record."""
    args = ("--sfus", "inhouse,janus", "--repeat", "1", "--preset", "browsers", "--users-per-room", "2",
            "--quality-frames", "0")
    proc = study(tmp_path, *args)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "janus #1 | " in line and "run folder:" in line:
            time.sleep(3)
            proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 130, "".join(lines)
    assert "run it again with --out" in "".join(lines)
    record = json.loads((tmp_path / "study.json").read_text())
    assert [(r["sfu"], r["status"]) for r in record["runs"]] == [("inhouse", "ok"), ("janus", "interrupted")]
    assert (tmp_path / "report.html").exists()
    proc = study(tmp_path, *args)
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, text
    assert "study: run 1 of 1: janus" in text and "inhouse #1 |" not in text
    record = json.loads((tmp_path / "study.json").read_text())
    assert [(r["sfu"], r["status"]) for r in record["runs"]] == [("inhouse", "ok"), ("janus", "ok")]
    assert record["results"]["janus"]["runs"] and record["results"]["inhouse"]["runs"]
    # a study of another scenario in the same folder is refused
    proc = study(tmp_path, *args[:-3], "3", *args[-2:])   # --users-per-room 3
    text = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2 and "holds a study of another scenario (it differs in users_per_room)" in text
    # a record made before a setting existed ran as its default does: it is taken up, not refused
    for key in ("simulcast", "receive_layer"):
        del record["scenario"][key]
    (tmp_path / "study.json").write_text(json.dumps(record))
    proc = study(tmp_path, *args)
    text = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0 and "nothing left to do" in text, text
    proc = study(tmp_path, *args, "--simulcast", "2")
    text = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2 and "(it differs in media, simulcast)" in text, text


@full
def test_a_run_client_bound_at_its_first_count_is_run_again_and_the_retry_counted(tmp_path):
    """A CPU hog on the clients' core from the first attempt's start to its end makes its first
    count client-bound: the study runs it again, on a quiet machine, and counts that one; both
    attempts are in the record, the first with why. (A given budget: what is tested is the retry.)"""
    args = ("--sfus", "janus", "--repeat", "1", "--sfu-cpus", "0.5", "--max-rooms", "2", "--target-samples", "2",
            "--quality-frames", "0")
    proc = study(tmp_path, *args)
    hog, lines = None, []
    # outside the clients' cgroup, on their CPU, ahead of them: a group of its own with ten times the
    # default weight, which sfubench's groups have, so they get a tenth of it (a nice value would
    # not do: the kernel's autogroups weigh the hog's session as one, whatever its nice)
    v1 = cgroups.version() == 1
    ahead = cgroups.ROOT / ("cpu" if v1 else "") / "sfubench-test-hog"
    ahead.mkdir(exist_ok=True)
    (ahead / ("cpu.shares" if v1 else "cpu.weight")).write_text("10240" if v1 else "1000")
    try:
        for line in proc.stdout:
            lines.append(line)
            if hog is None and "janus #1 | " in line and "run folder:" in line:
                hog = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", "while True: pass"])
                (ahead / "cgroup.procs").write_text(str(hog.pid))
            if "running it again" in line and hog is not None:
                hog.kill()
        assert proc.wait(60) == 0, "".join(lines)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
        ahead.rmdir()
    text = "".join(lines)
    record = json.loads((tmp_path / "study.json").read_text())
    first, second = record["runs"]
    assert (first["attempt"], first["status"], second["attempt"], second["status"]) == (1, "ok", 2, "ok"), record
    assert first["retried"].startswith("client-bound at its first count (7)") and not second.get("retried"), first
    assert "janus #1: client-bound at its first count (7)" in text and "running it again (attempt 2 of 2)" in text
    assert second["quiet"]["quiet"], second["quiet"]
    assert record["results"]["janus"]["runs"] == [second["run_dir"]]
    assert not metrics.analyse(runfiles.load(second["run_dir"])).knee.client_bound
    assert any("attempt 1: client-bound" in why for why in record["results"]["janus"]["why"])
