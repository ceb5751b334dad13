"""The engine's functions take what they work on, not a dozen loose arguments: a run's parts travel
as one context (sfubench/context.py) or a description of their own. No function of sfubench/ takes
more than six parameters (positional and keyword ones, not `self` or `cls`), but the settings
schema's opt(), whose keyword-only fields are the schema itself."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOST = 6
EXEMPT = {("sfubench/settings.py", "opt")}


def parameters(fn: ast.FunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + bool(a.vararg) + bool(a.kwarg)


def too_many(source: str, path: str) -> list[str]:
    return [f"{path}:{n.lineno} {n.name}() takes {parameters(n)}"
            for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and parameters(n) > MOST and (path, n.name) not in EXEMPT]


def test_no_function_of_the_engine_takes_more_than_six_parameters():
    found = []
    for f in sorted((ROOT / "sfubench").rglob("*.py")):
        path = str(f.relative_to(ROOT))
        found += too_many(f.read_text(), path)
    assert found == []


def test_the_check_counts_what_a_signature_holds():
    source = ("def a(self, b, c, d, e, f, g): pass\n"
              "def h(b, c, d, e, f, *, g, i): pass\n"
              "def j(b, *rest, **more): pass\n"
              "class K:\n    def opt(self, a, b, c, d, e, f, g): pass\n")
    assert too_many(source, "x.py") == ["x.py:2 h() takes 7", "x.py:5 opt() takes 7"]


def test_the_settings_name_no_site():
    """What is true where is the sites' to say (sites.py: their defaults and refusals): config.py
    takes no `remote`, refuses nothing for a site and picks no default by whether an SFU address
    was given."""
    tree = ast.parse((ROOT / "sfubench" / "config.py").read_text())
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    assert not [f.name for f in functions if "remote" in f.name or any(
        a.arg == "remote" for a in (*f.args.args, *f.args.kwonlyargs))]
    assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "sfu_address"]
