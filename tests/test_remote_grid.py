"""A load test through a remote grid: the distributed path of the cloud, in miniature
(tests/support/minigrid.py). The engine builds no lab and starts neither the SFU nor the grid; it is given
their addresses, as Terraform's outputs and the Kubernetes provisioner give them, and the node's
browsers load the pages from the runner's address and send media to the SFU's, over the bridge."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sfubench import grid as grid_mod
from sfubench import synthetic
from sfubench.agent import PROBE_PORT
from sfubench.cgroups import CpuGroup
from sfubench.config import ROOT, cache_root
from sfubench.rundir import read

from support.minigrid import MiniCloud
from support.tiers import full

SECRET_BEARING = "livekit"
NODE_CORES = 1.5

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    work = tmp_path_factory.mktemp("minicloud")
    cloud = MiniCloud(work)
    # the node's container: its cgroup, with a limit as k8s/base/node.yaml gives it
    node = CpuGroup("sfubm-node", cores=NODE_CORES)
    try:
        cloud.up()
        cloud.serve_sfu("janus", cache_root())
        cloud.node_media(work / "node-cache")
        grid_mod.install(grid_mod.grid_cache_dir())
        cloud.node_group = node.create()
        cloud.url = cloud.start_grid(grid_mod.grid_cache_dir() / "lib", sessions=4, node_group=cloud.node_group)
        yield cloud
    except BaseException:
        for name in ("sfu", "hub", "node"):
            print(f"--- {name}\n{cloud.log(name)}")
        raise
    finally:
        cloud.down()
        node.remove()


def test_loadtest_through_a_remote_grid(mini, tmp_path):
    out = tmp_path / "runs"
    before = {"node": mini.bytes("node", "tx"), "sfu": mini.bytes("sfu", "rx"),
              "run": mini.bytes("run", "rx") + mini.bytes("run", "tx")}
    cmd = mini.exec("run", [
        sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--preset", "browsers", "--rooms", "1", "--users-per-room", "3",
        "--participants-per-browser", "1", "--sfu-address", mini.address("sfu"), "--grid-url", mini.url,
        "--page-address", mini.address("run"), "--node-cache", str(mini.work / "node-cache"),
        "--quality-frames", "0", "--out", str(out), "--results-db", str(tmp_path / "results.sqlite"), "--background-interval", "0",
        "--client-probes", f"http://{mini.address('node')}:{PROBE_PORT}/probe"])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=mini.env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + mini.log("sfu")
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "ok"
    assert meta["sfu"]["address"] == mini.address("sfu")
    assert meta["chrome"]["version"]
    # what the SFU ran on and what it logged, from its host into the run folder
    host = json.loads((run_dir / "sfu-host.json").read_text())
    assert host["cpu_model"] and host["cpus"] >= 1 and host["memory_bytes"] > 0, host
    assert "Janus" in (run_dir / "sfu-host.log").read_text(errors="replace")
    assert meta.get("report") and "failed" not in r.stdout, r.stdout

    # every participant's page saw every video of the room play, its own included: 3 x 3 checks
    checks = read(run_dir, "checks")
    assert len(checks) == 9 and all(c["ok"] for c in checks), checks

    # the browsers ran on the node (the hub's only one) and their media crossed the bridge to the
    # SFU's host; the runner's host carried the pages, the stats and the pages' audio recordings
    # (uploaded once, kept in audio/), not the media
    assert [n["uri"] for n in mini.status["nodes"]] == [f"http://{mini.address('node')}:5555"]
    sent, got = mini.bytes("node", "tx") - before["node"], mini.bytes("sfu", "rx") - before["sfu"]
    runner = mini.bytes("run", "rx") + mini.bytes("run", "tx") - before["run"]
    recorded = sum(f.stat().st_size for f in (run_dir / "audio").glob("*.wav"))
    assert recorded > 0 and len(read(run_dir, "audio")) == 9, recorded   # 3 pages: 2 peers + microphone
    assert sent > 1e6 and got > 1e6 and runner - recorded < got / 2, (sent, got, runner, recorded)

    # and the videos played: the frame codes arrive at close to the clip's rate, as locally
    tables = json.loads((run_dir / "tables.json").read_text())
    assert tables["headline"]["code_fps"] > 12, tables["headline"]

    # the SFU's host probed its SFU (`sfubench serve`'s probe, read over the bridge): its CPU, its
    # processes, and its interface's bytes, which the bridge's own count bears out
    rows = [row for row in read(run_dir, "server") if row["role"] == "sfu"]
    assert {(row["phase"], row["edge"]) for row in rows} == {("ramp", "start"), ("ramp", "end"),
                                                            ("target", "start"), ("target", "end")}, rows
    assert all(row["cpu"] > 0 for row in rows if row["edge"] == "end") and "janus" in rows[-1]["processes"], rows
    probed = rows[-1]["net_rx_bytes"] - rows[0]["net_rx_bytes"]
    assert 0 < probed <= got, (probed, got)
    assert tables["tables"]["cost"]["rows"], tables["tables"]["cost"]

    # the node's agent measured its container: the browsers' CPU against its limit, and throttling
    clients = [row for row in read(run_dir, "server") if row["role"] == "clients"]
    assert len(clients) == 4 and all(row["cores"] == NODE_CORES and row["hosts"] == 1 for row in clients), clients
    # the node's clock compared with the runner's at every read: one machine's, so within the error
    assert all(abs(row["clock_offset_ms"]) <= row["clock_error_ms"] + 5 for row in clients), clients
    assert not [e for e in read(run_dir, "events") if e["event"] == "clock_offset"]
    assert all(row["cpu"] > 0.05 and "throttled_s" in row for row in clients if row["edge"] == "end"), clients
    assert "not measured" not in tables["clients"], tables["clients"]


def test_synthetic_participants_from_a_generator_on_the_grids_host(mini, tmp_path):
    """A room of one browser and two synthetic participants, these carried by an sfubench-synth
    started on the node's host before the run (`-listen`, as a cloud's generators are), in the
    node's cgroup: the engine sends it the joins over the bridge, and it reports to the engine's
    collector as a local generator does."""
    node = mini.address("node")
    mini.spawn("synth", "node", [sys.executable, "-m", "sfubench.cli", "generate", "--sfu", "janus", "--address", node,
                                 "--cache", str(mini.work / "node-cache"), "--binary", str(synthetic.build(cache_root()))],
               group=mini.node_group)
    deadline = time.monotonic() + 120   # as a pod's readiness probe would, before the runner uses it
    while "taking commands at" not in mini.log("synth"):
        assert time.monotonic() < deadline and mini.procs["synth"].poll() is None, mini.log("synth")
        time.sleep(0.2)
    out = tmp_path / "runs"
    cmd = mini.exec("run", [
        sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--preset", "browsers", "--rooms", "1", "--users-per-room", "3",
        "--real-per-room", "1", "--participants-per-browser", "1", "--sfu-address", mini.address("sfu"),
        "--grid-url", mini.url, "--page-address", mini.address("run"), "--node-cache", str(mini.work / "node-cache"),
        "--synthetic-generators", f"http://{node}:{synthetic.GENERATOR_PORT}/command",
        "--client-probes", f"http://{node}:{PROBE_PORT}/probe",
        "--quality-frames", "0", "--out", str(out), "--results-db", str(tmp_path / "results.sqlite"),
        "--background-interval", "0"])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=mini.env())
    finally:
        mini.stop("synth")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + mini.log("synth")
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    started = [(e["user"], e.get("client")) for e in read(run_dir, "events") if e["event"] == "participant_started"]
    assert started == [("r1u1", None), ("r1u2", "synthetic"), ("r1u3", "synthetic")], started

    # every video of the room verified playing, the browser's and the generator's participants' alike
    checks = read(run_dir, "checks")
    assert len(checks) == 9 and all(c["ok"] for c in checks), checks
    assert {c["client"] for c in checks} == {"browser", "synthetic"}

    # the generator's own records reached the engine: its participants' samples and its pacing
    samples = [s for s in read(run_dir, "samples") if s["phase"] == "target" and s["kind"] == "video"]
    assert {s["user"] for s in samples if s["client"] == "synthetic" and s["direction"] == "send" and s["bytes"]} \
        == {"r1u2", "r1u3"}
    assert all(w["pacing_ms_p99"] is not None for w in read(run_dir, "windows")), read(run_dir, "windows")

    # its CPU is the node's: the agent's rows count it with the browser's
    clients = [row for row in read(run_dir, "server") if row["role"] == "clients" and row["edge"] == "end"]
    assert clients and all(row["cpu"] > 0.05 for row in clients), clients


@full   # LiveKit's build is `make test-sfus`'s
def test_an_sfu_with_secrets_gets_them_over_ssh_and_nowhere_else(mini, tmp_path):
    """LiveKit on the SFU host, its API key and secret delivered as in the cloud: the runner makes
    a key for the run, the host's OpenSSH lets that key do nothing but run the receiver
    (scripts/receive-secrets.sh, forced), `sfubench serve --secrets` waits for the file; then the
    room plays, its tokens signed with the delivered secret."""
    mini.stop("sfu")
    received = mini.work / "secrets.env"
    public_key = tmp_path / "key.pub"
    out = tmp_path / "runs"
    settings = {"sfu": SECRET_BEARING, "preset": "browsers", "rooms": 1, "users_per_room": 3, "participants_per_browser": 1,
                "page_address": mini.address("run"), "node_cache": str(mini.work / "node-cache"),
                "quality_frames": 0, "background_interval": 0, "out": str(out),
                "results_db": str(tmp_path / "results.sqlite")}
    mini.serve_sfu(SECRET_BEARING, cache_root(), secrets=received)
    runner = subprocess.Popen(mini.exec("run", [sys.executable, str(ROOT / "tests" / "support" / "remote_runner.py"),
                                                json.dumps(settings), str(public_key), mini.address("sfu"), mini.url]),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                              env=mini.env(PYTHONPATH=str(ROOT)))
    deadline = time.monotonic() + 30
    while not public_key.exists() or not public_key.read_text():
        assert runner.poll() is None and time.monotonic() < deadline, runner.stdout.read()
        time.sleep(0.2)
    forced = f'restrict,command="{ROOT}/scripts/receive-secrets.sh {received}"'
    mini.sshd("sfu", f"{forced} {public_key.read_text()}")
    try:
        stdout, _ = runner.communicate(timeout=900)
    finally:
        runner.kill()
    assert runner.returncode == 0, stdout[-4000:] + mini.log("sfu") + mini.log("sshd-sfu")
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", stdout[-3000:]
    assert "secrets: the run's token and livekit's secrets delivered to" in stdout

    # the host took the runner's secrets (tokens signed with them were accepted: every video played)
    # and the run's token, which its probe answered to (below), from nowhere else
    secrets = dict(line.split("=", 1) for line in received.read_text().splitlines())
    assert sorted(secrets) == ["SFUBENCH_LIVEKIT_API_KEY", "SFUBENCH_LIVEKIT_API_SECRET", "SFUBENCH_RUN_TOKEN"]
    assert secrets["SFUBENCH_RUN_TOKEN"] == mini.token
    assert received.stat().st_mode & 0o777 == 0o600
    assert "serve: secrets received" in mini.log("sfu")
    run_dir = Path(result["run_dir"])
    checks = read(run_dir, "checks")
    assert len(checks) == 9 and all(c["ok"] for c in checks), checks

    # the host's probe of its SFU answered from before the SFU did: every window has its row
    sfu = [row for row in read(run_dir, "server") if row["role"] == "sfu"]
    assert len(sfu) == 4 and "livekit-server" in sfu[-1]["processes"], sfu

    # with no --client-probes, the report does not claim the nodes had CPU to spare
    assert "CPU was not measured in 2 of the 2 windows" in json.loads(
        (run_dir / "tables.json").read_text())["clients"]

    # ... and they are in no file of the run, and the run's key is gone
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert not [v for v in secrets.values() if v.encode() in path.read_bytes()], path
    assert not Path(result["key_dir"]).exists()

    # the key could not run anything else: the host ran the receiver, which refused an empty delivery
    code, printed, err = result["other"]
    assert code == 1 and "refused" in err and not printed, result["other"]
