"""docs/adding-an-sfu.md, for real: the adapter its snippets make (each code block headed by the file
it is) is listed by `list-sfus`, and carries a room through the engine as the conformance suite's
first checks ask: it starts and answers its health check, a browser and two synthetic participants
join, every video of the room plays, getStats reaches every stream, and stopping it leaves nothing."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from sfubench import cgroups, config, loadtest
from sfubench.progress import Progress
from sfubench.rundir import read

from support.tiers import full

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "adding-an-sfu.md"
BLOCK = re.compile(r"^```\w+ (sfu-configs/example/[\w.]+)\n(.*?)^```", re.S | re.M)
PREFIX, SUBNET = "sfubad", "127.0.24"

@pytest.fixture(scope="module")
def example():
    files = BLOCK.findall(DOC.read_text())
    assert sorted(Path(f).name for f, _ in files) == ["client.html", "install.sh", "sfu.toml"], files
    folder = ROOT / "sfu-configs" / "example"
    assert not folder.exists(), f"{folder} is the document's: remove it"
    try:
        for path, text in files:
            (ROOT / path).parent.mkdir(exist_ok=True)
            (ROOT / path).write_text(text)
        (folder / "install.sh").chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_documented_adapter_is_listed(example):
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "list-sfus"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    line = next(line for line in r.stdout.splitlines() if line.startswith("example "))
    assert "0.1.0" in line and "runs in local and cloud" in line, line


@pytest.mark.e2e
@full   # a room through the adapter suites' part, `make test-sfus`
def test_the_documented_adapter_carries_a_room_and_stops_cleanly(example, tmp_path):
    cfg = config.load(cli={"sfu": "example", "preset": "browsers", "users_per_room": 3, "real_per_room": 1,
                           "quality_frames": 0, "background_interval": 0, "out": str(tmp_path),
                           "lab_prefix": PREFIX, "lab_subnet": SUBNET}, env={})
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout))
    assert status == "ok", (run_dir / "meta.json").read_text()
    checks = read(run_dir, "checks")
    assert len(checks) == 9 and all(c["ok"] for c in checks), checks
    users = {"r1u1", "r1u2", "r1u3"}
    samples = [s for s in read(run_dir, "samples") if s["phase"] == "target" and s["kind"] == "video" and s["bytes"]]
    assert {s["user"] for s in samples if s["direction"] == "send"} == users
    assert {(s["user"], s["peer"]) for s in samples if s["direction"] == "recv"} == {
        (u, p) for u in users for p in users if u != p}
    assert {s["client"] for s in samples} == {"browser", "synthetic"}
    assert not Path("/run/netns", f"{PREFIX}-sfu").exists() and not cgroups.CpuGroup(f"{PREFIX}-sfu").pids()
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(run_dir) in " ".join(p.info["cmdline"] or [])]
