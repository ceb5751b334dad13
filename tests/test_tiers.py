"""The suite's tiers (tests/support/tiers.py, the Makefile, docs/testing.md): every test runs in some target
the README names, and in one only: `make test`'s marker expression and those of `make test-all`'s
parts, each collected as the Makefile collects it, cover the whole suite without overlapping; those
it runs on every core at once are modules of their own, none of them a timed end-to-end run."""
import json
import re
import subprocess
import sys
from pathlib import Path

from support.tiers import BESIDE

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = (ROOT / "Makefile").read_text()


def expressions() -> dict[str, str]:
    """The Makefile's marker expression of each target: `make test`'s and its parts'."""
    variables = dict(re.findall(r"^(TIER_TEST|PART_[A-Z0-9]+) := (.+)$", MAKEFILE, re.M))
    targets = {}
    for target, recipe in re.findall(r"^(test[a-z0-9-]*):[^\n]*\n((?:\t[^\n]*\n)+)", MAKEFILE, re.M):
        used = re.findall(r"\$\(call pytest,\$\((\w+)\)\)", recipe)
        if used:
            (name,) = used
            targets[target] = variables[name]
    return targets


# One process collects the suite once per marker expression: pytest imports the modules once, where
# a process per collection imported them all again.
COLLECT = """
import json, sys, pytest
class Ids:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]
found = {}
for name, args in json.loads(sys.argv[1]).items():
    ids = Ids()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args], plugins=[ids])
    assert code in (0, 5), (name, code)
    found[name] = ids.ids
with open(sys.argv[2], "w") as f:
    json.dump(found, f)
"""


def collected(runs: dict[str, list[str]], tmp_path: Path) -> dict[str, set[str]]:
    """The test ids each run's pytest arguments (`-m EXPR`, or none: the whole suite) collect."""
    out = tmp_path / "collected.json"
    r = subprocess.run([sys.executable, "-c", COLLECT, json.dumps(runs), str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return {name: set(ids) for name, ids in json.loads(out.read_text()).items()}


def test_every_test_is_in_exactly_one_target_and_test_all_runs_them_all(tmp_path):
    targets = expressions()
    assert set(targets) == {"test", "test-sfus", "test-cloud", "test-e2e"}, targets
    (prerequisites,) = re.findall(r"^test-all: (.*)$", MAKEFILE, re.M)
    assert prerequisites.split() == ["test", "test-sfus", "test-cloud", "test-e2e"]
    by_target = collected({"": [], "beside": ["-m", "beside"], "beside, timed": ["-m", "beside and e2e"],
                           **{t: ["-m", expr] for t, expr in targets.items()}}, tmp_path)
    everything = by_target.pop("")
    # the modules make runs on every core at once exist, and none of them drives a timed run
    beside, timed = by_target.pop("beside"), by_target.pop("beside, timed")
    modules = {i.split("::")[0] for i in beside}
    assert modules == {f"tests/{m}.py" for m in BESIDE}, sorted(modules ^ {f"tests/{m}.py" for m in BESIDE})
    assert not timed, f"end-to-end tests run beside others: {sorted(timed)[:3]}"
    assert len(by_target["test"]) > len(everything) / 2, "make test must stay the suite, not a sample of it"
    for t, ids in by_target.items():
        assert ids, f"make {t} collects nothing"
        for u, other in by_target.items():
            assert t == u or not ids & other, f"make {t} and make {u} both run {sorted(ids & other)[:3]}"
    assert set().union(*by_target.values()) == everything, sorted(everything - set().union(*by_target.values()))[:5]
