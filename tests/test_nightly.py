"""The nightly workflow cannot run here (it needs AWS and a cluster); what can be checked is that it
is scheduled, always destroys, and calls sfubench with commands and flags that exist."""
from __future__ import annotations

import re
import shlex

import pytest
import yaml

from sfubench import cli
from sfubench.config import ROOT

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
SHELL_VALUES = {"$SCENARIO": WORKFLOW["env"]["SCENARIO"], "$RESULTS_DB": "/tmp/r.sqlite",
                "$(hostname -I | cut -d' ' -f1)": "10.42.0.5", "${{ matrix.sfu }}": "janus",
                "$runs": "runs/nightly/a", '"$sfu"': "janus", '"$r"': "runs/nightly/a"}


def _expand(command: str) -> str:
    for k, v in SHELL_VALUES.items():
        command = command.replace(k, v)
    return command


def _sfubench_calls() -> list[list[str]]:
    calls = []
    for job in WORKFLOW["jobs"].values():
        for step in job.get("steps", []):
            for line in re.split(r"[;\n]", _expand(step.get("run", ""))):
                m = re.search(r"make cloud-loadtest SFU=(\S+) ARGS=\"([^\"]*)\"", line)
                if m:
                    calls.append(["cloud-loadtest", "--sfu", m.group(1), "--cloud", "aws", *shlex.split(m.group(2))])
                m = re.search(r"sfubench\.cli (.*?)(?:\s+do|\s+done|$)", line)
                if m:
                    calls.append(shlex.split(m.group(1).replace(">/dev/null", "")))
    return calls


def test_scheduled_and_manual():
    on = WORKFLOW[True] if True in WORKFLOW else WORKFLOW["on"]   # YAML 1.1 reads `on` as true
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on


def test_every_run_destroys_always():
    steps = WORKFLOW["jobs"]["run"]["steps"]
    cleanup = [s for s in steps if "cloud-cleanup" in s.get("run", "")]
    assert cleanup and cleanup[0].get("if") == "always()"
    runs = [i for i, s in enumerate(steps) if "make cloud-loadtest" in s.get("run", "") and "--dry-run" not in s["run"]]
    plans = [i for i, s in enumerate(steps) if "--dry-run" in s.get("run", "")]
    assert plans and runs and plans[0] < runs[0] < steps.index(cleanup[0]), "plan and cost first, cleanup last"


@pytest.mark.parametrize("argv", _sfubench_calls(), ids=lambda a: " ".join(a[:3]))
def test_commands_and_flags_exist(argv):
    cli._parser().parse_args(argv)   # exits (SystemExit) on an unknown command or flag


def test_the_check_above_sees_every_call():
    commands = {a[0] for a in _sfubench_calls()}
    assert commands == {"cloud-loadtest", "cloud-cleanup", "compare", "trend"}
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["cloud-loadtest", "--no-such-flag"])


def test_a_regression_fails_the_workflow_after_everything_is_published():
    """trend exits 3 on a regression; the publish job notes it and publishes anyway, and a job of
    its own fails the workflow, so the pages of a bad night are still deployed."""
    jobs = WORKFLOW["jobs"]
    step = next(s for s in jobs["publish"]["steps"] if "sfubench.cli trend" in s.get("run", ""))
    assert "--junit" in step["run"] and '"$rc" -eq 3' in step["run"] and "set +e" in step["run"]
    assert jobs["publish"]["outputs"]["regressed"] == "${{ steps.%s.outputs.regressed }}" % step["id"]
    assert jobs["regressions"]["needs"] == "publish" and jobs["deploy"]["needs"] == "publish"
    (gate,) = jobs["regressions"]["steps"]
    assert gate["if"] == "needs.publish.outputs.regressed != ''" and "exit 1" in gate["run"]
