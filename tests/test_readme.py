"""The README's commands, as written: every `make` and `sfubench` line of its code blocks names a
target the Makefile has and options the parser takes, with values the settings accept (as
`sfubench config` would resolve them; nothing is run)."""
import re
import shlex
import sys
from pathlib import Path

import pytest

from sfubench import cli, study
from sfubench.sites import RemoteSite

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
TARGETS = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))
# what each make target runs (the Makefile's recipes): its variables become these options
AS_CLI = {"loadtest": ["loadtest"], "study": ["study"], "cloud-loadtest": ["cloud-loadtest"], "report": ["report"],
          "compare": ["compare"], "trend": ["trend"], "list-sfus": ["list-sfus"]}
VARIABLES = {"SFU": "--sfu", "CLOUD": "--cloud", "ROOMS": "--rooms"}

sys.path.insert(0, str(ROOT / "bench"))
import soak  # noqa: E402


def lines() -> list[str]:
    out = []
    for block in re.findall(r"^```\n(.*?)^```", README, re.S | re.M):
        for line in block.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line.startswith(("make ", "sfubench ", ".venv/bin/sfubench ")):
                out.append(line)
    return out


def test_the_readme_shows_the_commands_it_is_about():
    shown = {shlex.split(line)[1] for line in lines()}
    assert {"loadtest", "test", "study", "compare", "cloud-loadtest", "trend"} <= shown, shown


@pytest.mark.parametrize("line", lines())
def test_every_command_line_of_the_readme_is_accepted_as_written(line):
    words = [w for w in shlex.split(line) if w != "..."]
    if words[0] != "make":
        argv = words[1:]
    else:
        target, assigned = words[1], dict(w.split("=", 1) for w in words[2:])
        assert target in TARGETS, f"make {target}: no such target"
        args = [w for w in shlex.split(assigned.pop("ARGS", "")) if w != "..."]
        if target == "soak":
            soak.parser().parse_args(args)
            return
        if target not in AS_CLI:
            assert not args and not assigned, f"make {target} takes no {sorted(assigned) or 'ARGS'}"
            return
        positional = shlex.split(assigned.pop("RUN", "") + " " + assigned.pop("RUNS", ""))
        argv = [*AS_CLI[target], *[a for k, v in assigned.items() for a in (VARIABLES[k], v)], *positional, *args]
    parsed = cli._parser().parse_args(argv)   # unknown options and malformed values exit 2 here
    if parsed.command in ("loadtest", "study", "cloud-loadtest"):
        cli._settings(parsed, site=RemoteSite if parsed.command == "cloud-loadtest" else None)
    if parsed.command == "study":
        study.parse_sfus(parsed.sfus)
