"""The cloud path rehearsed on a bare host (tests/support/barehost.py): the user_data Terraform renders for
a run, fed to a minimal Debian 12 booted with systemd, must bring the SFU up healthy where the
runner reaches it, with nothing on the host beforehand but what a cloud image has.

`make test` rehearses Janus's host as the nightly stands it up and cleans up after it; `make
test-cloud` every local SFU's, mediasoup's and Medooze's native builds included."""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from sfubench import config
from sfubench.agent import PROBE_PORT, TOKEN_HEADER
from sfubench.cloud import run as cloud_run
from sfubench.cloud import terraform
from sfubench.cloud.courier import Courier
from sfubench.config import ROOT, cache_root
from sfubench.lab import Host
from sfubench.sfu import Adapter

from support.awsapi import moto_server
from support.barehost import BareHost, debian_root
from support.controlplane import ControlPlane
from support.tiers import full

LOCAL = tuple(name for name in config.available_sfus() if "local" in Adapter.load(name).where)
HOST_REPO = "/srv/sfubench.git"
INSTALL_TIMEOUT_S = 1200   # a bare host installs everything: apt, the venv, the SFU


@pytest.fixture(scope="module")
def image():
    return debian_root(cache_root())


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, str]:
    """This checkout's commit as a bare repository, which the host clones as it would the project's
    own (only what is committed reaches a host)."""
    bare = tmp_path_factory.mktemp("repo") / "sfubench.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(ROOT), str(bare)], check=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    return bare, commit


def caches() -> dict[Path, str]:
    """What the hosts' installs download, kept between rehearsals (this machine's folder -> the
    host's): pip's, Go's modules and builds, npm's. What they build is built on the host each time."""
    mine = cache_root() / "rehearsal"
    binds = {Path.home() / ".cache" / "pip": "/root/.cache/pip", mine / "go": "/root/go",
             mine / "go-build": "/root/.cache/go-build", mine / "npm": "/root/.npm"}
    for folder in binds:
        folder.mkdir(parents=True, exist_ok=True)
    return binds


def user_data(sfu: str, host: BareHost, commit: str, courier: Courier) -> str:
    """The user_data Terraform renders for `sfu`'s host of a run whose VPC is the host's subnet."""
    plan = terraform.plan_offline({
        "run_id": "rh1", "owner": "ci", "sfus": terraform.sfus_variable([sfu]), "vpc_cidr": f"{host.subnet}.0/24",
        "operator_cidr": f"{host.router}/32", "repo_url": f"file://{HOST_REPO}", "git_ref": commit,
        "page_origin": host.router, "hours": 1, "probe_port": PROBE_PORT,
        "secrets_public_key": courier.public_key}, "aws")
    return plan["hosts"][sfu]["user_data"]


def healthy(adapter: Adapter, host: BareHost, work: Path, token: str) -> dict:
    """Waits for the host's probe, then for its SFU's own health check as a run attaches to it;
    returns the host's facts, read with the run's `token`. A forged request (no token, or another)
    gets 403 and nothing of the host."""
    url = f"http://{host.address}:{PROBE_PORT}/facts"
    host.wait_for(url, INSTALL_TIMEOUT_S)   # any answer: the probe is up
    adapter.attach(Host("", "", host.address), work, INSTALL_TIMEOUT_S, host.router)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for forged in ({}, {TOKEN_HEADER: token + "x"}):
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(urllib.request.Request(url, headers=forged), timeout=10)
        assert e.value.code == 403 and b"hostname" not in e.value.read()
    with opener.open(urllib.request.Request(url, headers={TOKEN_HEADER: token}), timeout=10) as r:
        return json.loads(r.read())


def rehearse(sfu: str, image: Path, repo: tuple[Path, str], work: Path) -> dict:
    """Boots a bare host on `sfu`'s user_data (the run's token and its secrets delivered over SSH as
    a run delivers them) and waits until its SFU is healthy; returns its facts."""
    bare, commit = repo
    host = BareHost(work)
    adapter = Adapter.load(sfu)
    courier = Courier(adapter, secrets.token_urlsafe(16))
    data = user_data(sfu, host, commit, courier)
    try:   # from the boot on: whatever fails, the namespace, the router's rules and the root go
        host.boot(image, data, binds={bare: HOST_REPO, **caches()})
        courier.deliver(host.address, INSTALL_TIMEOUT_S)
        return healthy(adapter, host, work, courier.token)
    finally:
        (work / "cloud-init-output.log").write_text(host.output())
        host.down()
        courier.close()


@full
@pytest.mark.parametrize("sfu", LOCAL)
def test_rehearsal_a_bare_host_brings_its_sfu_up_and_its_probe_refuses_a_forged_token(sfu, image, repo, tmp_path):
    facts = rehearse(sfu, image, repo, tmp_path)
    assert facts["hostname"] == BareHost.NAME and facts["cpus"] >= 1, facts   # the bare host's, not ours


# A stand-in for environments/aws, whose provider cannot be had here: the same state from apply to
# destroy in the run's folder, its one host a bare one, booted and halted by provisioners.
HOST_ENVIRONMENT = """
terraform {
  backend "local" {}
}
variable "run_id" { type = string }
variable "address" { type = string }
variable "boot" { type = string }
variable "halt" { type = string }
resource "terraform_data" "janus" {
  input = var.halt
  provisioner "local-exec" { command = var.boot }
  provisioner "local-exec" {
    when    = destroy
    command = self.input
  }
}
output "sfus" { value = { janus = { address = var.address } } }
"""


def nightly_cleanup() -> list[str]:
    """The commands of the nightly's step that destroys, whatever happened, what its runs left."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            if step.get("name") == "destroy what is left":
                return [line for line in step["run"].splitlines() if line.strip()]
    raise AssertionError("the nightly has no step named 'destroy what is left'")


def test_rehearsal_the_nightlys_cleanup_passes_after_a_clean_run(image, repo, tmp_path):
    """A nightly run that went well: its host made through Terraform from the run's folder, its
    SFU healthy on the bare host (`make test`'s one rehearsal), then destroyed by the run's teardown. The nightly's cleanup step, its own
    commands in the runner's checkout, against the cluster's API (a real control plane) and AWS's
    (moto's server: a stand-in), must then pass with nothing left to destroy."""
    bare, commit = repo
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".venv").symlink_to(ROOT / ".venv")
    run_id = cloud_run.run_id_for()
    host = BareHost(tmp_path / "host")
    host.work.mkdir()
    courier = Courier(Adapter.load("janus"), secrets.token_urlsafe(16))
    keys = contextlib.ExitStack()
    keys.callback(courier.close)
    (tmp_path / "user-data").write_text(user_data("janus", host, commit, courier))
    (tmp_path / "environment").mkdir()
    (tmp_path / "environment" / "main.tf").write_text(HOST_ENVIRONMENT)
    script = Path(__file__).parent / "support" / "barehost.py"
    binds = " ".join(f"{src}={dst}" for src, dst in {bare: HOST_REPO, **caches()}.items())
    hosts = terraform.Hosts(tmp_path / "environment", {
        "run_id": run_id, "address": host.address,
        "boot": f"{sys.executable} {script} up {host.work} {image} {tmp_path / 'user-data'} {binds}",
        "halt": f"{sys.executable} {script} down {host.work}"}, workspace / "runs" / "nightly" / f"{run_id}-cloud-aws")
    try:
        hosts.apply()
        assert hosts.outputs()["sfus"]["janus"]["address"] == host.address
        courier.deliver(host.address, INSTALL_TIMEOUT_S)   # the run's token, as run_on hands it over
        facts = healthy(Adapter.load("janus"), host, tmp_path, courier.token)
        assert facts["hostname"] == BareHost.NAME and facts["cpus"] >= 1, facts   # the bare host's, not ours
        hosts.destroy()   # the run's teardown
        assert not host.running() and not Path("/run/netns", host.name).exists()
    finally:
        host.down()   # nothing to do unless the teardown failed
        keys.close()

    with moto_server() as aws, contextlib.ExitStack() as stack:
        cluster = ControlPlane(tmp_path / "controlplane").start()
        stack.callback(cluster.stop)
        env = {**os.environ, **aws, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": str(ROOT)}
        for command in nightly_cleanup():
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=workspace, env=env,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, f"{command}\n{r.stdout}{r.stderr}"
