"""Thresholds the run must meet (--assert): judged once the run folder is complete, said in the
terminal, kept in meta.json (which the report shows) and written as junit.xml for CI systems; the
command exits 3 when one failed (cli.py). With --abort-on-fail (k6's abortOnFail), each step's
figures are judged before the next: the first failure stops the ramp there, and counts as failed."""
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
        flag="assert", repeat=True, scenario=False, metavar="EXPR"),
        "abort_on_fail": opt(False, "stop adding load at the first step whose figures fail a --assert "
                             "threshold (judged on that step's own measurements; thresholds on what a "
                             "step has not, such as the knee, wait for the run's end): the run then "
                             "measures its target at that load and exits 3", scenario=False)}
    aborted: dict | None = None   # the verdict that stopped the ramp

    @classmethod
    def wanted(cls, cfg) -> bool:
        return bool(expressions(cfg)) or cfg.abort_on_fail or super().wanted(cfg)

    @classmethod
    def check(cls, cfg) -> None:
        if not expressions(cfg):
            raise ConfigError(f"--output thresholds{' and --abort-on-fail need' if cfg.abort_on_fail else ' needs'} "
                              "at least one --assert EXPR")
        try:
            judged.parse_all(expressions(cfg))
        except judged.ThresholdError as e:
            raise ConfigError(str(e)) from None

    def halt(self) -> str | None:
        if not self.cfg.abort_on_fail or self.aborted:
            return None
        from reports import metrics, runfiles
        series = metrics.analyse(runfiles.load(self.run_path)).series
        if not series:
            return None
        step = max(series, key=lambda r: r["participants"])
        judgeable = [t for t in judged.parse_all(expressions(self.cfg)) if step.get(t.key) is not None]
        failed = [v for v in judged.judge(judgeable, step) if not v["ok"]]
        if not failed:
            return None
        n = step["participants"]
        self.aborted = {**failed[0], "threshold": f"{failed[0]['threshold']} at {n} participants, where the "
                        "ramp stopped (--abort-on-fail)"}
        return f"threshold {judged.line(failed[0])} at {n} participants: no more load (--abort-on-fail)"

    def stop(self) -> dict:
        from reports import metrics, runfiles
        a = metrics.analyse(runfiles.load(self.run_path))
        verdicts = judged.judge(judged.parse_all(expressions(self.cfg)), a.headline)
        if self.aborted:
            verdicts.append(self.aborted)
        for v in verdicts:
            self.say(f"threshold {judged.line(v)}")
        junit = judged.write_junit(judged.cases(verdicts), self.run_path / JUNIT,
                                   f"thresholds.{self.run_path.name}")
        failed = sum(1 for v in verdicts if not v["ok"])
        return {"thresholds": {"passed": len(verdicts) - failed, "failed": failed, "verdicts": verdicts,
                               "junit": str(junit)}}
