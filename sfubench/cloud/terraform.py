"""The SFU hosts of a cloud run, through Terraform (terraform/): variables written from the
adapters, the plan and its cost shown before anything is created, apply, outputs, destroy."""
from __future__ import annotations

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
    """The `sfus` variable: per adapter its version, TCP ports, UDP ranges and whether it has
    secrets (sfu-configs/)."""
    out = {}
    for name in names:
        a = Adapter.load(name)
        tcp, udp = a.firewall()
        out[name] = {"version": a.version, "tcp_ports": tcp,
                     "udp_ranges": [{"from": lo, "to": hi} for lo, hi in udp], "secrets": bool(a.secrets)}
    return out


def environment(cloud: str) -> Path:
    env = TERRAFORM / "environments" / cloud
    if not env.is_dir():
        known = sorted(p.name for p in (TERRAFORM / "environments").iterdir())
        raise TerraformError(f"no Terraform environment for cloud {cloud!r}; there are: {', '.join(known)}")
    return env


def prices(cloud: str) -> dict[str, float]:
    """The environment's price list (environments/<cloud>/prices.json), which its hosts use too."""
    return json.loads((environment(cloud) / "prices.json").read_text())["prices"]


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
    """The SFU hosts of one run: `apply` then `outputs`, and `destroy` whatever happened; the state
    lives in `work` (the run's folder)."""

    def __init__(self, cloud: str, variables: dict, work: Path):
        self.env = environment(cloud)
        self.work = work
        self.work.mkdir(parents=True, exist_ok=True)
        self.var_file = work / "terraform.tfvars.json"
        self.var_file.write_text(json.dumps(variables, indent=2))
        self.data_dir = work / ".terraform"

    def _tf(self, *args: str, what: str) -> str:
        return run([*args, "-no-color"], self.env, what, self.data_dir)

    def apply(self) -> None:
        self._tf("init", "-input=false", f"-backend-config=path={self.work / 'terraform.tfstate'}", what="init")
        self._tf("apply", "-auto-approve", "-input=false", f"-var-file={self.var_file}", what="apply")

    def outputs(self) -> dict:
        return {k: v["value"] for k, v in json.loads(self._tf("output", "-json", what="output")).items()}

    def destroy(self) -> None:
        if (self.work / "terraform.tfstate").exists():
            self._tf("destroy", "-auto-approve", "-input=false", f"-var-file={self.var_file}", what="destroy")
        shutil.rmtree(self.data_dir, ignore_errors=True)
