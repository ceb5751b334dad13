"""terraform/ checked offline: no AWS provider can be obtained here, so the provider-free logic
module (sfu-plan) is validated, linted and tested with `terraform test`, its plan is computed from
the real adapters and its cloud-init scripts parsed by bash; every module is fmt-checked and
linted. Not exercised here: the AWS provider's resources (environments/aws, modules/aws-sfu-host)
beyond formatting and lint, and any call to a cloud API."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sfubench import cli, config
from sfubench.config import ROOT
from sfubench.agent import PROBE_PORT
from sfubench.cloud import courier as courier_mod
from sfubench.cloud import terraform
from sfubench.cloud.courier import Courier
from sfubench.cloud.tools import tool
from sfubench.sfu import Adapter
from sfubench.sites import RemoteSite

TF = terraform.TERRAFORM
MODULES = [TF / "modules" / "sfu-plan", TF / "modules" / "aws-sfu-host", TF / "environments" / "aws"]


def _tf(*args, cwd: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([tool("terraform"), *args], cwd=cwd, capture_output=True, text=True,
                          env={**terraform._env(), **(env or {})})


def test_every_module_is_formatted():
    r = _tf("fmt", "-check", "-recursive", "-diff", cwd=TF)
    assert r.returncode == 0, r.stdout + r.stderr


def test_logic_module_validates_and_its_tests_pass(tmp_path):
    data = {"TF_DATA_DIR": str(tmp_path / "data")}
    module = TF / "modules" / "sfu-plan"
    assert _tf("init", "-backend=false", "-input=false", cwd=module, env=data).returncode == 0
    r = _tf("validate", "-no-color", cwd=module, env=data)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _tf("test", "-no-color", cwd=module, env=data)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "14 passed, 0 failed" in r.stdout


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(TF)))
def test_tflint(module):
    """tflint's bundled Terraform rules (no AWS ruleset can be fetched here): declared types,
    documented variables and outputs, pinned providers, no unused declarations."""
    r = subprocess.run([tool("tflint"), f"--chdir={module}", "--format=compact",
                        f"--config={TF / '.tflint.hcl'}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_firewall_ports_come_from_the_adapters():
    assert Adapter.load("janus").firewall() == ([8188, 8088], [(20000, 20999)])
    assert Adapter.load("inhouse").firewall() == ([7000], [(7001, 7001)])
    assert Adapter.load("jitsi").firewall() == ([443], [(10000, 10000)])
    for name in config.available_sfus():
        tcp, udp = Adapter.load(name).firewall()
        assert tcp and udp, f"{name} must open signalling and media"


@pytest.fixture(scope="module")
def courier():
    c = Courier(Adapter.load("livekit"), "a-runs-token-0123456789")
    yield c
    c.close()


@pytest.fixture(scope="module")
def plan(courier):
    variables = {"run_id": "t1", "owner": "ci", "sfus": terraform.sfus_variable(config.available_sfus()),
                 "vpc_cidr": "10.42.0.0/16", "operator_cidr": "203.0.113.7/32", "git_ref": "b940d9a",
                 "sfu_profile": "tuned", "hours": 1.5, "probe_port": PROBE_PORT,
                 "secrets_public_key": courier.public_key}
    return terraform.plan_offline(variables, "aws")


def test_offline_plan_has_one_identical_host_per_sfu(plan):
    assert sorted(plan["hosts"]) == sorted(config.available_sfus())
    rules = plan["hosts"]["livekit"]["ingress"]
    assert {(r["protocol"], r["from"], r["to"], r["cidr"]) for r in rules} == {
        ("tcp", 7880, 7880, "10.42.0.0/16"), ("udp", 50000, 60000, "10.42.0.0/16"),
        ("tcp", PROBE_PORT, PROBE_PORT, "10.42.0.0/16"), ("tcp", 22, 22, "203.0.113.7/32")}
    prices = terraform.prices("aws")
    n = len(config.available_sfus())
    assert plan["cost"]["total"] == pytest.approx(n * prices["c5.2xlarge"] * 1.5)


def test_rendered_cloud_init_is_valid_bash_for_every_sfu(plan, tmp_path):
    for name, host in plan["hosts"].items():
        script = tmp_path / f"{name}.sh"
        script.write_text(host["user_data"])
        r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert r.returncode == 0, f"{name}: {r.stderr}"
        assert f"serve --sfu {name} --sfu-profile tuned" in host["user_data"]
        assert "checkout --quiet 'b940d9a'" in host["user_data"]
        # the self-destruct deadline comes first: the run's 1.5 h, then the host powers off
        assert host["user_data"].splitlines()[6].startswith("shutdown -P +90 ")
    assert 'instance_initiated_shutdown_behavior = "terminate"' in (
        ROOT / "terraform" / "modules" / "aws-sfu-host" / "main.tf").read_text()


def test_the_token_and_secrets_reach_every_host_over_ssh_never_through_cloud_init(plan, courier):
    """Only the run key's public half is in cloud-init (and so in Terraform's state), forced to the
    one command that writes the secrets file; on every SFU's host `sfubench serve` waits for that
    file, which brings the run's token its probe answers to (and the SFU's secrets, if any)."""
    for name, host in plan["hosts"].items():
        data = host["user_data"]
        assert (f'restrict,command="/opt/sfubench/scripts/receive-secrets.sh {courier_mod.HOST_FILE}" '
                f"{courier.public_key}\n") in data, name
        assert f"--secrets {courier_mod.HOST_FILE}" in data, name
        assert courier.token not in data and "SFUBENCH_RUN_TOKEN" not in data, name
        for value in courier.adapter.secret_env().values():
            assert value not in data, name


def test_receive_secrets_writes_the_file_whole_and_refuses_anything_else(tmp_path):
    script, target = ROOT / "scripts" / "receive-secrets.sh", tmp_path / "secrets.env"
    good = "SFUBENCH_LIVEKIT_API_KEY=abc\nSFUBENCH_LIVEKIT_API_SECRET=d-e_f\n"
    r = subprocess.run([str(script), str(target)], input=good, capture_output=True, text=True)
    assert r.returncode == 0 and "2 secret(s)" in r.stdout, r.stderr
    assert target.read_text() == good and target.stat().st_mode & 0o777 == 0o600
    for bad in ("", "PATH=/tmp/evil\n", good + "sh -c 'rm -rf /'\n", "SFUBENCH_X=has space\n"):
        r = subprocess.run([str(script), str(target)], input=bad, capture_output=True, text=True)
        assert r.returncode == 1 and "refused" in r.stderr, bad
        assert target.read_text() == good, "a refused delivery must leave the last one as it was"
    assert [p.name for p in tmp_path.iterdir()] == ["secrets.env"]


def test_bash_check_can_fail(tmp_path):
    """The syntax check above rejects a broken script."""
    bad = tmp_path / "bad.sh"
    bad.write_text("if true; then\n  echo unterminated\n")
    assert subprocess.run(["bash", "-n", str(bad)], capture_output=True).returncode != 0


def _no_files(monkeypatch, tmp_path):
    """No AWS credentials file and no kubeconfig, wherever this machine keeps its own."""
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))


def test_cloud_loadtest_without_credentials_stops_naming_what_is_missing(tmp_path, monkeypatch, capsys):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_ROLE_ARN",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "SFUBENCH_OPERATOR_CIDR"):
        monkeypatch.delenv(var, raising=False)
    _no_files(monkeypatch, tmp_path)
    code = cli.main(["cloud-loadtest", "--sfu", "janus", "--cloud", "aws", "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    for what in ("AWS credentials", "kubeconfig", "SFUBENCH_OPERATOR_CIDR", "--page-address"):
        assert what in err
    assert not (tmp_path / "runs").exists(), "nothing may be created"


def test_cloud_loadtest_with_credentials_named_still_checks_each(tmp_path, monkeypatch, capsys):
    _no_files(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("SFUBENCH_OPERATOR_CIDR", "203.0.113.7/32")
    code = cli.main(["cloud-loadtest", "--sfu", "janus", "--page-address", "10.42.0.5"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and "kubeconfig" in err and "AWS credentials" not in err


def test_cloud_loadtest_dry_run_prints_plan_and_cost(tmp_path, monkeypatch, capsys):
    _no_files(monkeypatch, tmp_path)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    code = cli.main(["cloud-loadtest", "--sfu", "janus", "--dry-run", "--shape", "ramp", "--rooms", "4",
                     "--users-per-room", "7",
                     "--participants-per-browser", "1", "--owner", "nightly", "--hours", "3",
                     "--out", str(tmp_path / "runs")])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    price = terraform.prices("aws")["c5.2xlarge"]
    assert f"cost estimate: 1 x c5.2xlarge at ${price:.3f}/h x 3 h = ${price * 3:.2f}" in text
    assert "allow udp 20000-20999 from 10.42.0.0/16 (media)" in text
    assert "sfubench:owner=nightly" in text
    assert "up to 7 (4 sessions and 5 participants each" in text   # 28 browsers at peak
    assert "a real run would also need: AWS credentials" in text
    assert "each powering off (and terminated) after 3 h whatever happens" in text
    # the whole cost: 7 nodes of 1.25 vCPU and the hub's 0.5 at $0.0425 a vCPU-hour; 28 participants
    # sending 632 kbit/s each and receiving it from 6 others, 3 h, at $0.02 a GB across zones
    assert "grid pods: 9.25 vCPU at the peak x 3 h x $0.0425/vCPU-h = $1.18" in text
    assert "traffic: up to 167 GB between the clients and the SFU host, $3.34 if it crosses zones" in text
    assert f"at most ${price * 3 + 1.18 + 3.34:.2f} in all (no load balancer is made)" in text
    assert "network: a VPC of the run's own (10.42.0.0/16); unless the cluster" in text
    assert not (tmp_path / "runs").exists()


def test_cloud_loadtest_rejects_unknown_cloud(capsys):
    assert cli.main(["cloud-loadtest", "--sfu", "janus", "--cloud", "gcp", "--dry-run"]) == cli.EXIT_USAGE
    assert "unknown cloud 'gcp'; sfubench knows: aws" in capsys.readouterr().err


def test_a_cloud_only_sfu_gets_its_plan(capsys):
    assert cli.main(["cloud-loadtest", "--sfu", "jitsi", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert "allow tcp 443 from 10.42.0.0/16" in out.out + out.err
    assert "allow udp 10000 from 10.42.0.0/16 (media)" in out.out + out.err


def test_an_sfu_with_secrets_plans_their_delivery_and_keeps_no_key(tmp_path, monkeypatch, capsys):
    """LiveKit's dry run: its plan says how the secrets travel; the run's key pair is made and
    deleted again, outside the run folder, and nothing is created."""
    _no_files(monkeypatch, tmp_path)
    keys = set(Path(tempfile.gettempdir()).glob("sfubench-courier-*"))
    code = cli.main(["cloud-loadtest", "--sfu", "livekit", "--dry-run", "--out", str(tmp_path / "runs")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "the run's token and livekit's secrets: over SSH with a key made for this run" in out.out + out.err
    assert set(Path(tempfile.gettempdir()).glob("sfubench-courier-*")) == keys
    assert not (tmp_path / "runs").exists()


def test_a_cloud_run_with_synthetic_participants_plans_its_generators(tmp_path, monkeypatch, capsys):
    _no_files(monkeypatch, tmp_path)
    code = cli.main(["cloud-loadtest", "--sfu", "janus", "--dry-run", "--preset", "browsers", "--rooms", "16",
                     "--real-per-room", "1",
                     "--out", str(tmp_path / "runs")])
    out = capsys.readouterr()
    assert code == 0, out.err
    # 16 rooms of 5, 4 synthetic each receiving 4 streams: 256 streams, 240 a generator
    assert "generators scaled with the rooms up to 2 (240 received streams each, 1 CPU" in out.out + out.err
    code = cli.main(["cloud-loadtest", "--sfu", "jitsi", "--dry-run", "--real-per-room", "1"])
    assert code == cli.EXIT_USAGE and "jitsi has no driver for synthetic participants" in capsys.readouterr().err


def test_the_hosts_go_into_the_clusters_subnet_and_admit_its_vpc_and_its_pages(monkeypatch):
    """SFUBENCH_SUBNET_ID (the nightly's SUBNET_ID) reaches Terraform, the hosts admit clients
    from SFUBENCH_VPC_CIDR, the cluster's VPC, not from a new VPC's range, and `sfubench serve`
    learns where the pages come from."""
    from sfubench.cloud import run as cloud_run
    cfg = config.load(cli={"sfu": "inhouse", "page_address": "172.31.4.5"}, env={}, site=RemoteSite)
    monkeypatch.delenv("SFUBENCH_SUBNET_ID", raising=False)
    monkeypatch.delenv("SFUBENCH_VPC_CIDR", raising=False)
    courier = Courier(Adapter.load("inhouse"), "a-runs-token-0123456789")
    try:
        assert "subnet_id" not in cloud_run.variables(cfg, "r1", "ci", 1.0, courier)   # a VPC of the run's own
        monkeypatch.setenv("SFUBENCH_SUBNET_ID", "subnet-0abc")
        monkeypatch.setenv("SFUBENCH_VPC_CIDR", "172.31.0.0/16")
        tfvars = cloud_run.variables(cfg, "r1", "ci", 1.0, courier)
    finally:
        courier.close()
    assert tfvars["subnet_id"] == "subnet-0abc" and tfvars["vpc_cidr"] == "172.31.0.0/16"
    plan = terraform.plan_offline(tfvars, "aws")
    assert {r["cidr"] for r in plan["hosts"]["inhouse"]["ingress"] if r["from"] != 22} == {"172.31.0.0/16"}
    # the pages' origin (the runner's address) reaches the host, whose in-house SFU checks origins
    assert "serve --sfu inhouse --sfu-profile auto --page-origin '172.31.4.5'" in plan["hosts"]["inhouse"]["user_data"]
    env_vars = (ROOT / "terraform" / "environments" / "aws" / "variables.tf").read_text()
    assert 'variable "subnet_id"' in env_vars


LOCAL_ENVIRONMENT = """# A Terraform environment with no cloud (terraform_data, built into Terraform): the run folder's
# lifecycle, state and locks are the same as with a cloud's.
terraform {
  backend "local" {}
}
variable "run_id" {
  type = string
}
resource "terraform_data" "host" {
  input = var.run_id
}
output "sfus" {
  value = { janus = { address = "10.0.0.1" } }
}
"""


def test_a_run_folder_destroys_after_a_finished_run_a_killed_one_and_never_under_a_live_one(tmp_path):
    """With real Terraform: a finished run leaves no state, so a later cleanup has nothing to do
    (it used to fail with "Backend initialization required"); a killed run's folder (its data dir
    gone with the runner's checkout) still destroys; a live run's lock keeps another away."""
    env = tmp_path / "env"
    env.mkdir()
    (env / "main.tf").write_text(LOCAL_ENVIRONMENT)

    def resources(work):
        state = work / "terraform.tfstate"
        return json.loads(state.read_text())["resources"] if state.exists() else []

    finished = tmp_path / "r1-cloud-local"
    hosts = terraform.Hosts(env, {"run_id": "r1"}, finished)
    hosts.apply()
    assert hosts.outputs()["sfus"]["janus"]["address"] == "10.0.0.1" and resources(finished)
    hosts.destroy()
    assert not (finished / "terraform.tfstate").exists() and not (finished / ".terraform").exists()
    terraform.Hosts(env, {"run_id": "r1"}, finished).destroy()   # a second cleanup: nothing to do

    killed = tmp_path / "r2-cloud-local"
    terraform.Hosts(env, {"run_id": "r2"}, killed).apply()        # and never destroyed: the runner died
    shutil.rmtree(killed / ".terraform")                           # as a fresh checkout has it
    assert resources(killed)
    later = terraform.Hosts(env, {"run_id": "r2"}, killed)
    assert later.lock()
    later.destroy()
    assert not resources(killed)

    live = terraform.Hosts(env, {"run_id": "r3"}, tmp_path / "r3-cloud-local")
    live.apply()
    try:
        assert not terraform.Hosts(env, {"run_id": "r3"}, tmp_path / "r3-cloud-local").lock()
    finally:
        live.destroy()
    assert terraform.Hosts(env, {"run_id": "r3"}, tmp_path / "r3-cloud-local").lock()


PARENT = """
import os, signal, sys
from pathlib import Path
from sfubench.cloud import terraform
from sfubench.cloud.reaper import Reaper
env, work, end = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
hosts = terraform.Hosts(env, {"run_id": work.name}, work)
hosts.apply()
reaper = Reaper(env, work, None)
print(reaper.pid, flush=True)
sys.stdin.readline()
if end == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
hosts.destroy()
reaper.release()
"""


@pytest.mark.parametrize("end", ["killed", "torn down"])
def test_the_reaper_destroys_what_a_killed_run_made_and_nothing_else(tmp_path, end):
    """A cloud run's reaper, with real Terraform: deaf to SIGTERM and SIGINT; when its run dies
    with SIGKILL before its teardown it destroys the run's hosts; when the run tore down itself,
    it does nothing."""
    import psutil
    env = tmp_path / "env"
    env.mkdir()
    (env / "main.tf").write_text(LOCAL_ENVIRONMENT)
    work = tmp_path / "r8-cloud-local"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(env), str(work), end], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    reaper = psutil.Process(int(parent.stdout.readline()))
    for sig in (signal.SIGTERM, signal.SIGINT):
        reaper.send_signal(sig)
    time.sleep(0.5)
    assert reaper.is_running() and reaper.status() != psutil.STATUS_ZOMBIE
    assert json.loads((work / "terraform.tfstate").read_text())["resources"]
    parent.stdin.write("go\n")
    parent.stdin.flush()
    parent.wait(60)
    reaper.wait(120)   # not our child: its status is the parent's to read, its log is ours
    assert not (work / "terraform.tfstate").exists()
    log = (work / "reaper.log").read_text()
    if end == "killed":
        assert parent.returncode == -signal.SIGKILL and "reaper: hosts of r8-cloud-local destroyed" in log, log
    else:
        assert parent.returncode == 0 and log == "", log


@pytest.mark.parametrize("hours", ["nan", "inf", "0", "-1", "25"])
def test_hours_that_are_not_a_lifetime_are_refused_before_terraform(tmp_path, monkeypatch, capsys, hours):
    _no_files(monkeypatch, tmp_path)
    code = cli.main(["cloud-loadtest", "--sfu", "janus", "--dry-run", "--hours", hours, "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and "--hours must be a number of hours within 0-24" in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name, value, why", [
    ("SFUBENCH_OPERATOR_CIDR", "0.0.0.0/1", "wider than /8"),
    ("SFUBENCH_OPERATOR_CIDR", "0.0.0.0/0", "wider than /8"),
    ("SFUBENCH_OPERATOR_CIDR", "::/0", "wider than /32"),
    ("SFUBENCH_VPC_CIDR", "10.0.0.0/7", "wider than /8"),
    ("SFUBENCH_RUNNER_CIDR", "my laptop", "not an address block"),
])
def test_address_blocks_are_parsed_and_the_internet_refused_before_terraform(tmp_path, monkeypatch, capsys,
                                                                             name, value, why):
    _no_files(monkeypatch, tmp_path)
    monkeypatch.setenv(name, value)
    code = cli.main(["cloud-loadtest", "--sfu", "janus", "--dry-run", "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and f"{name} ({value}): {why}" in err, err
    assert not (tmp_path / "runs").exists()
