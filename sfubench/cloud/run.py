"""`sfubench cloud-loadtest`: the SFU's host from Terraform, the grid on Kubernetes, then the
engine's own run against them (sfubench/loadtest.py with --sfu-address and --grid-url), and
everything destroyed whatever happened. Nothing is created before the plan and its cost are
printed, and nothing at all when a credential is missing."""
from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .. import encoding, media as media_mod
from ..config import ROOT, Config, ConfigError
from ..agent import PROBE_PORT
from ..grid import check_answering
from ..progress import Progress
from ..synthetic import GENERATOR_PORT
from ..sfu import Adapter
from ..sites import Provisioned, RemoteSite
from . import sweep, terraform
from .courier import Courier
from .kube import SYNTH, GridSpec, KubeGrid, render
from .reaper import Reaper


# Shown by a dry run without SFUBENCH_OPERATOR_CIDR (a documentation address, RFC 5737).
OPERATOR_PLACEHOLDER = "203.0.113.7/32"
# The run's VPC when SFUBENCH_VPC_CIDR does not name the one the cluster and the runner are in.
VPC_CIDR = "10.42.0.0/16"


@dataclasses.dataclass
class Cloud:
    """What differs between clouds: the Terraform environment, the kustomize overlay, and how to
    tell that credentials are there (never what they are)."""
    name: str
    overlay: str
    credentials: Callable[[], list[str]]


def _aws_credentials() -> list[str]:
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return []
    if env.get("AWS_WEB_IDENTITY_TOKEN_FILE") and env.get("AWS_ROLE_ARN"):   # CI's OIDC role
        return []
    shared = Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials").expanduser()
    if env.get("AWS_PROFILE") or shared.exists():
        return []
    return ["AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
            "~/.aws/credentials, or AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE)"]


CLOUDS = {"aws": Cloud("aws", "aws", _aws_credentials)}


def cloud(name: str) -> Cloud:
    if name not in CLOUDS:
        raise ConfigError(f"unknown cloud {name!r}; sfubench knows: {', '.join(CLOUDS)}")
    return CLOUDS[name]


# The widest address block a run lets in anywhere (SSH, the hosts' clients, the grid's ingress): a
# typo or a lazy 0.0.0.0/0 must not open the hosts to the internet. IPv4 /8, IPv6 /32.
WIDEST_PREFIX = {4: 8, 6: 32}
CIDR_VARIABLES = ("SFUBENCH_OPERATOR_CIDR", "SFUBENCH_VPC_CIDR", "SFUBENCH_RUNNER_CIDR")


def check_cidrs() -> None:
    """ConfigError for an address block in the environment that is not one, or wider than
    WIDEST_PREFIX (which the whole internet is): parsed, not compared as text."""
    for name in CIDR_VARIABLES:
        value = os.environ.get(name)
        if not value:
            continue
        try:
            block = ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise ConfigError(f"{name} ({value}): not an address block such as 203.0.113.7/32") from None
        widest = WIDEST_PREFIX[block.version]
        if block.prefixlen < widest:
            raise ConfigError(f"{name} ({value}): wider than /{widest}; name the block that needs in "
                              "(your own address as /32, the cluster's VPC)")


def missing(c: Cloud, cfg: Config) -> list[str]:
    """What the run needs and this machine lacks, named (not the secrets themselves)."""
    out = c.credentials()
    if not _found_kubeconfig():
        out.append(f"a kubeconfig for the grid's cluster (KUBECONFIG or ~/.kube/config; looked at {_kubeconfig()})")
    if not os.environ.get("SFUBENCH_OPERATOR_CIDR"):
        out.append("SFUBENCH_OPERATOR_CIDR (the only address SSH to the SFU hosts may come from, e.g. 203.0.113.7/32)")
    if not cfg.page_address:
        out.append("--page-address (this runner's address that the grid's nodes reach, inside the VPC)")
    if not (shutil.which("ssh") and shutil.which("ssh-keygen")):
        out.append("the OpenSSH client (ssh, ssh-keygen): the run's token and the SFU's secrets go to its host "
                   "over SSH")
    try:
        _pull_secret()
    except ValueError as e:
        out.append(str(e))
    return out


def _pull_secret() -> str:
    """The registry credentials the nodes pull the images with, where they are private: the Docker
    config.json named by SFUBENCH_PULL_SECRET_FILE (as `docker login` writes it), or none."""
    path = os.environ.get("SFUBENCH_PULL_SECRET_FILE")
    if not path:
        return ""
    try:
        text = Path(path).expanduser().read_text()
        if not isinstance(json.loads(text).get("auths"), dict):
            raise ValueError
    except (OSError, ValueError, AttributeError):
        raise ValueError(f"SFUBENCH_PULL_SECRET_FILE ({path}): a Docker config.json with registry "
                         "credentials under \"auths\", readable here") from None
    return text


def _git_ref() -> tuple[str, bool]:
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    return sha, dirty


def deadline(run_id: str, hours: float) -> str:
    """When a run ends (RFC 3339, UTC), from its id's start and its --hours: tagged on everything it
    makes, so that the sweeper never deletes a live run; "" for an id that is not a start time."""
    started = sweep.run_started(run_id)
    return "" if started is None else (started + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def variables(cfg: Config, run_id: str, owner: str, hours: float, courier: Courier) -> dict:
    """The Terraform environment's variables for a run of `cfg`; `courier` carries the run's token
    and the SFU's secrets (Terraform gets only its public key)."""
    sha, _ = _git_ref()
    # SFUBENCH_SUBNET_ID: the cluster's own subnet, so that its nodes and the runner reach the hosts
    # (SFUBENCH_VPC_CIDR then names that VPC's block, the only one the hosts admit clients from)
    subnet = {"subnet_id": os.environ["SFUBENCH_SUBNET_ID"]} if os.environ.get("SFUBENCH_SUBNET_ID") else {}
    return {"run_id": run_id, "owner": owner, "sfus": terraform.sfus_variable([cfg.sfu]), **subnet,
            "vpc_cidr": os.environ.get("SFUBENCH_VPC_CIDR") or VPC_CIDR,
            "operator_cidr": os.environ.get("SFUBENCH_OPERATOR_CIDR") or OPERATOR_PLACEHOLDER,
            "git_ref": sha or "0000000", "sfu_profile": cfg.sfu_profile, "hours": hours,
            "deadline": deadline(run_id, hours),
            "page_origin": cfg.page_address,
            "probe_port": PROBE_PORT, "secrets_public_key": courier.public_key}


def _kubeconfig() -> str:
    return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def _found_kubeconfig() -> bool:
    return all(Path(p).exists() for p in _kubeconfig().split(os.pathsep) if p)


def _kube_api():
    """A client from the kubeconfig as kubectl reads it; KUBECONFIG is read now, not when the
    kubernetes package was imported (it reads it then)."""
    from kubernetes import config as kubeconfig
    return kubeconfig.new_client_from_config(config_file=_kubeconfig())


def kube_core():
    """The cluster's core API where a kubeconfig is found (the tag sweeper's namespaces), else None."""
    if not _found_kubeconfig():
        return None
    from kubernetes import client as k8s
    return k8s.CoreV1Api(_kube_api())


def run_id_for() -> str:
    return f"r{datetime.now(timezone.utc):%Y%m%d%H%M%S}"


def describe_plan(c: Cloud, cfg: Config, plan: dict, grid: KubeGrid, needs: list[str], tfvars: dict) -> str:
    """The plan as the user reads it before anything is created."""
    lines = [f"plan for {c.name}: {len(plan['hosts'])} SFU host(s), instance type {plan['cost']['instance_type']}, "
             f"each powering off (and terminated) after {plan['cost']['hours']:g} h whatever happens"]
    if tfvars.get("subnet_id"):
        lines.append(f"network: the hosts in subnet {tfvars['subnet_id']} (SFUBENCH_SUBNET_ID), clients admitted "
                     f"from {tfvars['vpc_cidr']}")
    else:
        lines.append(f"network: a VPC of the run's own ({tfvars['vpc_cidr']}); unless the cluster and this runner "
                     "reach it, set SFUBENCH_SUBNET_ID to the cluster's subnet and SFUBENCH_VPC_CIDR to its VPC's block")
    for name, h in plan["hosts"].items():
        lines.append(f"  host {h['name']} ({name}): tags {', '.join(f'{k}={v}' for k, v in sorted(h['tags'].items()))}")
        for r in h["ingress"]:
            ports = str(r["from"]) if r["from"] == r["to"] else f"{r['from']}-{r['to']}"
            note = " (a placeholder: SFUBENCH_OPERATOR_CIDR is unset)" if r["cidr"] == OPERATOR_PLACEHOLDER else ""
            lines.append(f"    allow {r['protocol']} {ports} from {r['cidr']}{note} ({r['why']})")
        lines.append(f"    cloud-init: {len(h['user_data'].splitlines())} lines, starts `sfubench serve --sfu {name}`")
        has = f" and {name}'s secrets" if Adapter.load(name).secrets else ""
        lines.append(f"    the run's token{has}: over SSH with a key made for this run (it may only write "
                     "them; Terraform gets its public half), from the operator's address")
    peak = grid.nodes_for(cfg, cfg.rooms_cap)
    node = next(o for o in grid.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "chrome-node")
    req = node["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    lines.append(f"grid (k8s/overlays/{c.overlay}) in namespace {grid.namespace}: a hub, Chrome nodes scaled "
                 f"with the rooms up to {peak} ({grid.sessions_per_node} sessions and {grid.participants_per_node} "
                 f"participants each, {req['cpu']} CPU and {req['memory']} per node)")
    generators = grid.generators_for(cfg, cfg.rooms_cap)
    if generators:
        synth = next(o for o in grid.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == SYNTH)
        limits = synth["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        lines.append(f"synthetic participants: generators scaled with the rooms up to {generators} "
                     f"({grid.streams_per_generator} received streams each, {limits['cpu']} CPU and "
                     f"{limits['memory']} per generator)")
    cost = plan["cost"]
    vcpu_hour, per_gb = terraform.rates(c.name)
    pods = grid.peak_cores(cfg) * cost["hours"] * vcpu_hour
    # every participant sends the clip and receives everyone else's in its room, through the SFU
    participants = cfg.rooms_cap * cfg.users_per_room
    kbps = (encoding.ENCODE_KBPS[cfg.media] + encoding.OPUS_KBPS) * participants * cfg.users_per_room
    traffic_gb = kbps * 1000 / 8 * 3600 * cost["hours"] / 1e9
    lines.append(f"grid pods: {grid.peak_cores(cfg):g} vCPU at the peak x {cost['hours']:g} h x ${vcpu_hour}/vCPU-h = "
                 f"${pods:.2f} (an upper bound: the peak for the whole run, on the cluster's nodes)")
    lines.append(f"traffic: up to {traffic_gb:.0f} GB between the clients and the SFU host, ${traffic_gb * per_gb:.2f} "
                 "if it crosses zones (free within one)")
    if cost["total"] is None:
        lines.append(f"cost: no price for {cost['instance_type']} in terraform/environments/{c.name}/prices.json")
    else:
        lines.append(f"cost estimate: {cost['hosts']} x {cost['instance_type']} at ${cost['price_per_hour']:.3f}/h "
                     f"x {cost['hours']:g} h = ${cost['total']:.2f} (SFU hosts); with the grid and the traffic "
                     f"at most ${cost['total'] + pods + traffic_gb * per_gb:.2f} in all (no load balancer is made)")
    if needs:
        lines.append("a real run would also need: " + "; ".join(needs))
    return "\n".join(lines)


def cloud_loadtest(cfg: Config, cloud_name: str, dry_run: bool, owner: str, hours: float,
                   progress: Progress | None = None) -> tuple[Path | None, str]:
    progress = progress or Progress()
    c = cloud(cloud_name)
    RemoteSite.refuse(cfg)
    check_cidrs()
    if cfg.browser_participants < cfg.participants and not Adapter.load(cfg.sfu).synthetic_driver:
        raise ConfigError(f"{cfg.sfu} has no driver for synthetic participants: run it with browsers only")
    needs = missing(c, cfg)
    if needs and not dry_run:
        raise ConfigError("cloud-loadtest needs, before anything is created: " + "; ".join(needs))
    sha, dirty = _git_ref()
    if dirty and not dry_run:
        raise ConfigError("the working tree has uncommitted changes: the SFU hosts check out the commit "
                          f"{sha[:12]} and would not run them; commit (and push) first")
    run_id = run_id_for()
    adapter = Adapter.load(cfg.sfu, profile=cfg.sfu_profile)
    # the run's token: in the grid's Secret, the SFU host's secrets file and the engine's memory only
    courier = Courier(adapter, secrets.token_urlsafe(24))
    try:
        tfvars = variables(cfg, run_id, owner, hours, courier)
        plan = terraform.plan_offline(tfvars, c.name)
        grid = KubeGrid(None, f"sfubench-{run_id}", GridSpec(objects=render(c.overlay)))
        progress.say(describe_plan(c, cfg, plan, grid, needs, tfvars))
        if dry_run:
            return None, "dry-run"
        return _apply_and_run(c, cfg, tfvars, run_id, progress, courier)
    finally:
        courier.close()


def run_on(cfg: Config, address: str, grid_url: str, courier: Courier, progress: Progress,
           provisioned: Provisioned = Provisioned()) -> tuple[Path, str]:
    """The engine's own run against an SFU host that `sfubench serve` runs, the run's token and the
    adapter's secrets handed to the host first; from the runner's host, inside the VPC. `provisioned`: what the
    provisioner gives the run beyond the addresses (sites.Provisioned); the generators it runs
    (`sfubench generate`) take commands at their Service's port unless --synthetic-generators
    says where."""
    from .. import loadtest
    courier.deliver(address, say=progress.say)
    has = f" and {cfg.sfu}'s secrets" if courier.adapter.secrets else ""
    progress.say(f"secrets: the run's token{has} delivered to {address}")
    generators_url = cfg.synthetic_generators or (
        f"http://{SYNTH}:{GENERATOR_PORT}/command" if provisioned.generators else "")
    site = RemoteSite(address, grid_url, cfg.page_address, cfg.node_cache or "/media",
                      dataclasses.replace(provisioned, generators_url=generators_url))
    with secrets_in_environment(courier):
        return loadtest.run(cfg, progress, site=site)


def _apply_and_run(c: Cloud, cfg: Config, tfvars: dict, run_id: str, progress: Progress,
                   courier: Courier) -> tuple[Path, str]:
    work = Path(cfg.out) / f"{run_id}-cloud-{c.name}"   # what `cleanup` finds if this process is killed
    env = terraform.environment(c.name)
    hosts = terraform.Hosts(env, tfvars, work)
    token = courier.token
    media = media_mod.build(cfg.media, cfg.cache_dir())   # the runner's copy, which the nodes must match
    grid = KubeGrid(_kube_api(), f"sfubench-{run_id}", GridSpec(
        overlay=c.overlay, sfu=cfg.sfu, token=token,
        runner_cidr=os.environ.get("SFUBENCH_RUNNER_CIDR") or tfvars["vpc_cidr"],
        commit=tfvars["git_ref"], media=(cfg.media, media.digest()), pull_secret=_pull_secret(),
        run={sweep.RUN_TAG: run_id, sweep.OWNER_TAG: tfvars.get("owner", ""),
             sweep.DEADLINE_TAG: tfvars.get("deadline", "")}))
    reaper = Reaper(env, work, grid.namespace)   # before anything exists: it outlives this process
    try:
        progress.say(f"terraform: creating the {cfg.sfu} host (state in {work})")
        hosts.apply()
        address = hosts.outputs()["sfus"][cfg.sfu]["address"]
        progress.say(f"kubernetes: deploying the grid into namespace {grid.namespace}")
        grid.reach_sfu(address)
        grid.deploy()
        return run_on(cfg, address, grid.url(), courier, progress, Provisioned(
            listeners=(grid.listener(cfg),), probes=(grid.probe(),), generators=lambda: grid.addresses(SYNTH),
            token=token,
            leftovers=lambda: [f"run {run_id}'s cloud hosts and grid: the reaper (pid {reaper.pid}) "
                               f"destroys them once this process ends; see {work / 'reaper.log'}"],
            # its grid starts without nodes, which come as the rooms start: a hub that answers will do
            grid_check=check_answering))
    finally:
        started, failed = time.monotonic(), False
        for what, stop in (("grid", grid.teardown), ("terraform", hosts.destroy)):
            try:
                stop()
            except Exception as e:   # the other still goes; what is left is said, never hidden
                failed = True
                progress.say(f"{what}: teardown failed, resources of run {run_id} may be left "
                             f"(tagged sfubench:run={run_id}): {e}; the reaper (pid {reaper.pid}) tries again")
        if failed:
            reaper.take_over()
        else:
            reaper.release()
        progress.say(f"cloud: torn down in {time.monotonic() - started:.0f} s")


@contextlib.contextmanager
def secrets_in_environment(courier: Courier):
    """The engine takes an adapter's secrets from the environment (sfu.Adapter.load): for the run,
    they are the ones the host was given, so the tokens it mints are the host's."""
    env = courier.adapter.secret_env()
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def cleanup(out: Path, progress: Progress | None = None) -> list[str]:
    """Destroys what runs under `out` left behind: every `<run_id>-cloud-<cloud>` folder's hosts
    (those its Terraform state still holds: none after a run that finished its teardown) and its
    grid's namespace. A folder a live run holds is skipped. Returns what failed."""
    progress = progress or Progress()
    failed = []
    for work in sorted(Path(out).glob("r*-cloud-*")):
        run_id, cloud_name = work.name.split("-cloud-")
        tfvars = work / "terraform.tfvars.json"
        steps = [("grid", lambda: KubeGrid(_kube_api(), f"sfubench-{run_id}", GridSpec(objects=render("base"))).teardown())]
        if tfvars.exists():
            hosts = terraform.Hosts(terraform.environment(cloud_name), json.loads(tfvars.read_text()), work)
            if not hosts.lock():
                progress.say(f"cleanup: {run_id}: a live run holds it: skipped")
                continue
            steps.append(("terraform", hosts.destroy))
        for what, stop in steps:
            try:
                stop()
                progress.say(f"cleanup: {run_id}: {what} destroyed")
            except Exception as e:
                failed.append(f"{run_id} {what}: {e}")
                progress.say(f"cleanup: {run_id}: {what} NOT destroyed: {e}")
    return failed


def valid_owner(owner: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.@-]{1,64}", owner):
        raise ConfigError(f"--owner must be 1-64 characters of letters, digits and _.@-, got {owner!r}")
    return owner
