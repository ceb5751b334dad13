"""Thresholds the run must meet (--assert): judged once the run folder is complete, said in the
terminal, kept in meta.json (which the report shows) and written as junit.xml for CI systems; the
command exits 3 when one failed (cli.py)."""
from __future__ import annotations

from reports import thresholds as judged

from ..settings import SEPARATOR, ConfigError, opt
from . import Output

JUNIT = "junit.xml"


def expressions(cfg) -> list[str]:
    return [e.strip() for e in cfg.assertions.split(SEPARATOR) if e.strip()]


class Thresholds(Output):
    """pass/fail thresholds over the report's figures (exit 3 on a failure), and junit.xml"""
    name = "thresholds"
    first = True   # its verdicts are in meta.json before the report is built
    options = {"assertions": opt(
        "", f"a threshold the run must meet: {judged.GRAMMAR}; give the flag once per threshold (in a "
        f"file, a list; in the environment, separated by {SEPARATOR}). A failed one makes the command "
        f"exit 3 and every verdict goes to the terminal, the report and junit.xml. Figures: "
        f"{', '.join(judged.names())}; statistics: {', '.join(judged.STATS)}",
        flag="assert", repeat=True, scenario=False, metavar="EXPR")}

    @classmethod
    def wanted(cls, cfg) -> bool:
        return bool(expressions(cfg)) or super().wanted(cfg)

    @classmethod
    def check(cls, cfg) -> None:
        if not expressions(cfg):
            raise ConfigError("--output thresholds needs at least one --assert EXPR")
        try:
            judged.parse_all(expressions(cfg))
        except judged.ThresholdError as e:
            raise ConfigError(str(e)) from None

    def stop(self) -> dict:
        from reports import metrics, runfiles
        a = metrics.analyse(runfiles.load(self.run_path))
        verdicts = judged.judge(judged.parse_all(expressions(self.cfg)), a.headline)
        for v in verdicts:
            self.say(f"threshold {judged.line(v)}")
        junit = judged.write_junit(judged.cases(verdicts), self.run_path / JUNIT,
                                   f"thresholds.{self.run_path.name}")
        failed = sum(1 for v in verdicts if not v["ok"])
        return {"thresholds": {"passed": len(verdicts) - failed, "failed": failed, "verdicts": verdicts,
                               "junit": str(junit)}}
