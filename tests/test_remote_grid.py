"""A load test through a remote grid: the distributed path of the cloud, in miniature
(tests/minigrid.py). The engine builds no lab and starts neither the SFU nor the grid; it is given
their addresses, as Terraform's outputs and the Kubernetes provisioner give them, and the node's
browsers load the pages from the runner's address and send media to the SFU's, over the bridge."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sfubench import grid as grid_mod
from sfubench.config import ROOT, cache_root
from sfubench.rundir import read

from minigrid import MiniCloud

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    work = tmp_path_factory.mktemp("minicloud")
    cloud = MiniCloud(work)
    try:
        cloud.up()
        cloud.serve_sfu("janus", cache_root())
        cloud.node_media(work / "node-cache")
        grid_mod.install(grid_mod.grid_cache_dir())
        cloud.url = cloud.start_grid(grid_mod.grid_cache_dir() / "lib", sessions=4)
        yield cloud
    except BaseException:
        for name in ("sfu", "hub", "node"):
            print(f"--- {name}\n{cloud.log(name)}")
        raise
    finally:
        cloud.down()


def test_loadtest_through_a_remote_grid(mini, tmp_path):
    out = tmp_path / "runs"
    before = {"node": mini.bytes("node", "tx"), "sfu": mini.bytes("sfu", "rx"),
              "run": mini.bytes("run", "rx") + mini.bytes("run", "tx")}
    cmd = mini.exec("run", [
        sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--rooms", "1", "--users-per-room", "3",
        "--participants-per-browser", "1", "--sfu-address", mini.address("sfu"), "--grid-url", mini.url,
        "--page-address", mini.address("run"), "--node-cache", str(mini.work / "node-cache"),
        "--quality-frames", "0", "--out", str(out), "--results-db", str(tmp_path / "results.sqlite"), "--background-interval", "0"])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + mini.log("sfu")
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "ok"
    assert meta["sfu"]["address"] == mini.address("sfu")
    assert meta["chrome"]["version"]
    assert meta.get("report") and "failed" not in r.stdout, r.stdout   # the report, built without SFU probes

    # every participant's page saw every video of the room play, its own included: 3 x 3 checks
    checks = read(run_dir, "checks")
    assert len(checks) == 9 and all(c["ok"] for c in checks), checks

    # the browsers ran on the node (the hub's only one) and their media crossed the bridge to the
    # SFU's host; the runner's host carried the pages and the stats, not the media
    assert [n["uri"] for n in mini.status["nodes"]] == [f"http://{mini.address('node')}:5555"]
    sent, got = mini.bytes("node", "tx") - before["node"], mini.bytes("sfu", "rx") - before["sfu"]
    runner = mini.bytes("run", "rx") + mini.bytes("run", "tx") - before["run"]
    assert sent > 1e6 and got > 1e6 and runner < got / 2, (sent, got, runner)

    # and the videos played: the frame codes arrive at close to the clip's rate, as locally
    headline = json.loads((run_dir / "tables.json").read_text())["headline"]
    assert headline["code_fps"] > 12, headline
