"""The suite's tiers (tests/support/tiers.py, the Makefile, docs/testing.md): every test runs in some target
the README names, and in one only: `make test`'s marker expression and those of `make test-all`'s
parts, each collected as the Makefile collects it, cover the whole suite without overlapping."""
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def collected(*args: str) -> set[str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode in (0, 5), r.stdout[-3000:] + r.stderr[-3000:]
    return {line for line in r.stdout.splitlines() if "::" in line}


def test_every_test_is_in_exactly_one_target_and_test_all_runs_them_all():
    targets = expressions()
    assert set(targets) == {"test", "test-sfus", "test-cloud", "test-e2e"}, targets
    (prerequisites,) = re.findall(r"^test-all: (.*)$", MAKEFILE, re.M)
    assert prerequisites.split() == ["test", "test-sfus", "test-cloud", "test-e2e"]
    with ThreadPoolExecutor(len(targets) + 1) as pool:   # five collections, side by side
        whole = pool.submit(collected)
        jobs = {t: pool.submit(collected, "-m", expr) for t, expr in targets.items()}
        everything, by_target = whole.result(), {t: job.result() for t, job in jobs.items()}
    assert len(by_target["test"]) > len(everything) / 2, "make test must stay the suite, not a sample of it"
    for t, ids in by_target.items():
        assert ids, f"make {t} collects nothing"
        for u, other in by_target.items():
            assert t == u or not ids & other, f"make {t} and make {u} both run {sorted(ids & other)[:3]}"
    assert set().union(*by_target.values()) == everything, sorted(everything - set().union(*by_target.values()))[:5]
