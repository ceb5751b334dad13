"""The SFU hosts of a cloud run, through Terraform (terraform/): variables written from the
adapters, the plan and its cost shown before anything is created, apply, outputs, destroy."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..config import ROOT
from ..sfu import Adapter
from .tools import tool

TERRAFORM = ROOT / "terraform"
PLAN_MODULE = TERRAFORM / "modules" / "sfu-plan"


class TerraformError(RuntimeError):
    pass


def sfus_variable(names: list[str]) -> dict:
    """The `sfus` variable: per adapter its version, TCP ports, UDP ranges and the toolchains its
    install needs on a bare host (sfu-configs/)."""
    out = {}
    for name in names:
        a = Adapter.load(name)
        tcp, udp = a.firewall()
        out[name] = {"version": a.version, "tcp_ports": tcp,
                     "udp_ranges": [{"from": lo, "to": hi} for lo, hi in udp],
                     "toolchains": a.data.get("toolchains", [])}
    return out


def environment(cloud: str) -> Path:
    env = TERRAFORM / "environments" / cloud
    if not env.is_dir():
        known = sorted(p.name for p in (TERRAFORM / "environments").iterdir())
        raise TerraformError(f"no Terraform environment for cloud {cloud!r}; there are: {', '.join(known)}")
    return env


def price_list(cloud: str) -> dict:
    """The environment's price list (environments/<cloud>/prices.json), which its hosts use too."""
    return json.loads((environment(cloud) / "prices.json").read_text())


def prices(cloud: str) -> dict[str, float]:
    """Each instance type's hourly price."""
    return price_list(cloud)["prices"]


def offer(cloud: str) -> dict:
    """The instance types the environment offers, each with its hourly price and vCPUs, and where
    the prices come from: what the study prices a participant-hour on."""
    d = price_list(cloud)
    return {"cloud": cloud, "source": d["_source"],
            "instances": {t: {"usd_hour": usd, "vcpus": d["vcpus"][t]} for t, usd in d["prices"].items()}}


def rates(cloud: str) -> tuple[float, float]:
    """(per vCPU-hour of the cluster's nodes, per GB of traffic between zones), from the same file."""
    d = price_list(cloud)
    return d["vcpu_hour"], d["traffic_gb"]


def _env() -> dict[str, str]:
    # no update check (a call to HashiCorp) and no interactive prompt
    env = {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1", "TF_INPUT": "0"}
    if not Path(env.get("TF_CLI_CONFIG_FILE") or "/").is_file():   # a missing one only adds warnings
        env.pop("TF_CLI_CONFIG_FILE", None)
    return env


def run(args: list[str], cwd: Path, what: str, data_dir: Path | None = None) -> str:
    env = _env() if data_dir is None else {**_env(), "TF_DATA_DIR": str(data_dir)}
    r = subprocess.run([tool("terraform"), *args], cwd=cwd, capture_output=True, text=True, env=env)
    if r.returncode:
        raise TerraformError(f"terraform {what} failed: {(r.stderr or r.stdout).strip()[-3000:]}")
    return r.stdout


# The environments' own variables, which the provider-free module does not take (where the hosts go).
ENVIRONMENT_ONLY = ("vpc_cidr", "subnet_id")


def plan_offline(variables: dict, cloud: str) -> dict:
    """`variables` are the environment's (those of the sfu-plan module, and ENVIRONMENT_ONLY). What the hosts would be (names, tags, firewall, cloud-init) and their cost, from the
    provider-free sfu-plan module alone: no provider, no credentials, nothing created."""
    with tempfile.TemporaryDirectory(prefix="sfubench-tfplan-") as d:
        root = Path(d)
        (root / "main.tf").write_text(
            'variable "v" {\n  type = any\n}\n'
            f'module "plan" {{\n  source = "{PLAN_MODULE}"\n'
            # as the environments call it: the clients are the VPC's
            + "".join(f"  {k} = var.v.{k}\n" for k in variables if k not in ENVIRONMENT_ONLY)
            + "  client_cidr = var.v.vpc_cidr\n"
            + f'  hourly_prices = jsondecode(file("{environment(cloud) / "prices.json"}")).prices\n}}\n'
            'output "hosts" {\n  value = module.plan.hosts\n}\n'
            'output "cost" {\n  value = module.plan.cost\n}\n')
        (root / "v.auto.tfvars.json").write_text(json.dumps({"v": variables}))
        run(["init", "-backend=false", "-input=false", "-no-color"], root, "init")
        run(["apply", "-auto-approve", "-input=false", "-no-color"], root, "plan (offline)")
        out = json.loads(run(["output", "-json", "-no-color"], root, "output"))
        return {k: v["value"] for k, v in out.items()}


class Hosts:
    """The SFU hosts of one run, from the Terraform environment folder `env`: `apply` then
    `outputs`, and `destroy` whatever happened; the state lives in `work` (the run's folder). From
    apply to destroy the folder is locked: a `cloud-cleanup` beside a live run leaves it alone."""

    def __init__(self, env: Path, variables: dict, work: Path):
        self.env = env
        self.work = work
        self.work.mkdir(parents=True, exist_ok=True)
        self.var_file = work / "terraform.tfvars.json"
        self.var_file.write_text(json.dumps(variables, indent=2))
        self.state = work / "terraform.tfstate"
        self.data_dir = work / ".terraform"
        self._lock = None

    def _tf(self, *args: str, what: str) -> str:
        return run([*args, "-no-color"], self.env, what, self.data_dir)

    def _init(self) -> None:
        # every time: a run folder whose data dir went (a finished run's, a new checkout's) still
        # destroys, instead of "Backend initialization required"
        self._tf("init", "-input=false", f"-backend-config=path={self.state}", what="init")

    def lock(self) -> bool:
        """Takes the run folder's lock; False when a live run holds it."""
        self._lock = open(self.work / "run.lock", "a+")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            return False
        return True

    def apply(self) -> None:
        if self._lock is None and not self.lock():
            raise TerraformError(f"another runner holds {self.work}")
        self._init()
        self._tf("apply", "-auto-approve", "-input=false", f"-var-file={self.var_file}", what="apply")

    def outputs(self) -> dict:
        return {k: v["value"] for k, v in json.loads(self._tf("output", "-json", what="output")).items()}

    def destroy(self) -> None:
        """Destroys what the state holds; once it holds nothing, the state goes, so a later cleanup
        has nothing to do here."""
        try:
            if self.state.exists():
                self._init()
                self._tf("destroy", "-auto-approve", "-input=false", f"-var-file={self.var_file}", what="destroy")
                for f in (self.state, self.work / "terraform.tfstate.backup"):
                    f.unlink(missing_ok=True)
            shutil.rmtree(self.data_dir, ignore_errors=True)
        finally:   # whatever happened, another (the reaper, a cleanup) may try now
            if self._lock is not None:
                self._lock.close()
                self._lock = None
