"""The cloud path rehearsed on a bare host (tests/barehost.py): the user_data Terraform renders for
a run, fed to a minimal Debian 12 booted with systemd, must bring the SFU up healthy where the
runner reaches it, with nothing on the host beforehand but what a cloud image has.

`make test` rehearses the SFUs whose installs fit CI's time (SUITE); `make test-cloud`
(SFUBENCH_REHEARSAL=all) every local SFU, mediasoup's and Medooze's native builds included."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from sfubench import config
from sfubench.agent import PROBE_PORT
from sfubench.cloud import terraform
from sfubench.cloud.courier import Courier
from sfubench.config import ROOT, cache_root
from sfubench.lab import Host
from sfubench.sfu import Adapter

from barehost import BareHost, debian_root

SUITE = ("janus", "inhouse", "livekit")
LOCAL = tuple(name for name in config.available_sfus() if "local" in Adapter.load(name).where)
SFUS = LOCAL if os.environ.get("SFUBENCH_REHEARSAL") == "all" else SUITE
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


def rehearse(sfu: str, image: Path, repo: tuple[Path, str], work: Path) -> dict:
    """Boots a bare host on `sfu`'s user_data (its secrets delivered over SSH as a run delivers
    them) and waits until its SFU is healthy; returns its facts."""
    bare, commit = repo
    host = BareHost(work)
    adapter = Adapter.load(sfu)
    courier = Courier(adapter) if adapter.secrets else None
    plan = terraform.plan_offline({
        "run_id": "rh1", "owner": "ci", "sfus": terraform.sfus_variable([sfu]), "vpc_cidr": f"{host.subnet}.0/24",
        "operator_cidr": f"{host.router}/32", "repo_url": f"file://{HOST_REPO}", "git_ref": commit,
        "page_origin": host.router, "hours": 1, "probe_port": PROBE_PORT,
        "secrets_public_key": courier.public_key if courier else ""}, "aws")
    try:   # from the boot on: whatever fails, the namespace, the router's rules and the root go
        host.boot(image, plan["hosts"][sfu]["user_data"], binds={bare: HOST_REPO, **caches()})
        if courier:
            courier.deliver(host.address, INSTALL_TIMEOUT_S)
        host.wait_for(f"http://{host.address}:{PROBE_PORT}/facts", INSTALL_TIMEOUT_S)
        # the SFU's own health check, as a run attaches to it
        adapter.attach(Host("", "", host.address), work, INSTALL_TIMEOUT_S, host.router)
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                f"http://{host.address}:{PROBE_PORT}/facts", timeout=10) as r:
            return json.loads(r.read())
    finally:
        (work / "cloud-init-output.log").write_text(host.output())
        host.down()
        if courier:
            courier.close()


@pytest.mark.parametrize("sfu", SFUS)
def test_rehearsal_a_bare_host_brings_its_sfu_up_from_the_rendered_user_data(sfu, image, repo, tmp_path):
    facts = rehearse(sfu, image, repo, tmp_path)
    assert facts["hostname"] == BareHost.NAME and facts["cpus"] >= 1, facts   # the bare host's, not ours
