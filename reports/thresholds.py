"""Thresholds a run must meet (`--assert`), k6-style: each is one expression over a figure of the
catalogue, judged on the run's headline (its figures at target, reports/metrics.py), and a run that
fails one exits 3. The same judgement serves the terminal, the report, the JUnit file and meta.json.

Grammar: `FIGURE[.STAT] OP NUMBER[%]`, e.g. `fps.p50>=13.5`, `rtt_send_ms.p95<100`, `knee>=35`,
`checks==100%`. FIGURE is a name of docs/metrics.md (or `checks`, the share of video checks
passed); STAT, for figures with percentiles, one of mean (the default), p50, p90, p95, p99, max; OP
one of >= <= > < == !=; NUMBER in the unit the report shows (Mbps, ms, %...).
"""
from __future__ import annotations

import difflib
import math
import operator
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from . import catalog

GRAMMAR = "FIGURE[.STAT] OP NUMBER[%], e.g. fps.p50>=13.5, rtt_send_ms.p95<100, knee>=35, checks==100%"
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
       "<": operator.lt}
STATS = ("mean", *catalog.PERCENTILES)
ALIASES = {"checks": "check_pass_rate"}
_EXPR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z0-9]+))?\s*(>=|<=|==|!=|>|<)\s*"
                   r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(%?)\s*")


class ThresholdError(ValueError):
    """An expression that cannot be judged; the message is one line naming it."""


@dataclass(frozen=True)
class Threshold:
    text: str
    figure: catalog.Figure
    stat: str          # "mean" or one of catalog.PERCENTILES
    op: str
    value: float       # in the figure's shown unit

    @property
    def key(self) -> str:
        """Its value's key in the headline."""
        return self.figure.name if self.stat == "mean" else f"{self.figure.name}_{self.stat}"


def names() -> list[str]:
    """What an expression may name, for the help and for near matches."""
    return [*ALIASES, *(f.name for f in catalog.FIGURES)]


def parse(text: str) -> Threshold:
    m = _EXPR.fullmatch(text)
    if not m:
        raise ThresholdError(f"--assert {text!r}: not an expression of the form {GRAMMAR}")
    name, stat, op, number, percent = m.groups()
    figure = catalog.BY_NAME.get(ALIASES.get(name, name))
    if figure is None:
        near = difflib.get_close_matches(name, names(), n=3, cutoff=0.5)
        raise ThresholdError(f"--assert {text!r}: no figure {name!r}"
                             + (f" (did you mean {', '.join(near)}?)" if near else "")
                             + "; the figures are listed in docs/metrics.md")
    stat = stat or "mean"
    if stat not in STATS:
        raise ThresholdError(f"--assert {text!r}: no statistic {stat!r}; one of {', '.join(STATS)}")
    if stat != "mean" and not figure.spread:
        with_stats = ", ".join(f.name for f in catalog.FIGURES if f.spread)
        raise ThresholdError(f"--assert {text!r}: {figure.name} is one number per run, without "
                             f"percentiles (those have them: {with_stats})")
    if percent and "%" not in figure.unit:
        raise ThresholdError(f"--assert {text!r}: {figure.name} is in {figure.unit}, not %")
    return Threshold(text.strip(), figure, stat, op, float(number))


def parse_all(texts: list[str]) -> list[Threshold]:
    return [parse(t) for t in texts if t.strip()]


def judge(thresholds: list[Threshold], headline: dict) -> list[dict]:
    """One verdict per threshold: whether it held and the value that decided it (shown unit). A
    figure the run did not measure fails its threshold: a gate must not pass on nothing."""
    out = []
    for t in thresholds:
        stored = headline.get(t.key)
        value = None if stored is None else stored * t.figure.scale
        if value is None:
            ok = False
        elif t.op in ("==", "!="):
            same = math.isclose(value, t.value, rel_tol=1e-9, abs_tol=1e-9)
            ok = same if t.op == "==" else not same
        else:
            ok = OPS[t.op](value, t.value)
        out.append({"threshold": t.text, "figure": t.figure.name, "stat": t.stat, "op": t.op,
                    "limit": t.value, "value": value, "unit": t.figure.unit, "ok": ok})
    return out


def line(v: dict) -> str:
    """A verdict as the terminal and the report say it."""
    shown = "not measured" if v["value"] is None else f"{v['value']:.6g} {v['unit']}"
    return f"{'passed' if v['ok'] else 'FAILED'}: {v['threshold']} ({shown})"


def write_junit(cases: list[tuple[str, bool, str]], path: Path, suite: str) -> Path:
    """A JUnit XML file for CI systems, one test case per (name, passed, message): the schema CI
    servers read (Jenkins' junit-10.xsd: testsuites > testsuite > testcase > failure)."""
    failed = sum(1 for _, ok, _ in cases if not ok)
    root = ET.Element("testsuites", tests=str(len(cases)), failures=str(failed))
    s = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failed),
                      errors="0", skipped="0")
    for name, ok, message in cases:
        case = ET.SubElement(s, "testcase", classname=f"sfubench.{suite}", name=name)
        if not ok:
            ET.SubElement(case, "failure", message=message, type="sfubench").text = message
    ET.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")
    return path


def cases(verdicts: list[dict]) -> list[tuple[str, bool, str]]:
    """The verdicts as JUnit test cases."""
    return [(v["threshold"], v["ok"], line(v)) for v in verdicts]


def section(verdicts: list[dict]) -> str:
    """The report's block of verdicts (none: nothing)."""
    if not verdicts:
        return ""
    from . import html
    failed = sum(1 for v in verdicts if not v["ok"])
    head = (f"{failed} of {len(verdicts)} thresholds FAILED: the run exits 3" if failed
            else f"All {len(verdicts)} thresholds held")
    items = "".join(f"<li>{html.escape(line(v))}</li>" for v in verdicts)
    return f'<div class="rule" id="thresholds"><b>{html.escape(head)}</b><ul>{items}</ul></div>'
