"""`sfubench study` (`make study`): the 2018 study on this machine. Every SFU, the same scenario and
the same cores, each run `repeat` times in interleaved order (A B C … A B C, so that a drift of the
machine spreads over all), then one comparison (reports/study.py).

The study folder is its own record: `study.json` holds the scenario and every run as it ends, so a
study cut short (Ctrl-C, a crash) keeps its finished runs, and run again with the same folder goes on
where it stopped. Each run is a `sfubench loadtest` of its own process, in a session of its own: an
SFU that fails or a run that crashes is a row that says why, never the end of the study. A Ctrl-C or
SIGTERM reaches the run once, through this process; a second one stops it at once."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reports import metrics, runfiles
from reports import study as study_report

from .config import ROOT, Config, ConfigError, as_toml, available_sfus
from .progress import Progress
from .sfu import Adapter

STATE = "study.json"
FIRST_ESTIMATE_S = 360   # a run's length before one has finished here: the default study's are 4-6 min
# settings a run of the study takes from its own place, not from the scenario file
PER_RUN = ("sfu", "out", "preset")


def plan(sfus: list[str], repeat: int) -> list[tuple[str, int]]:
    """(SFU, repeat) in the order they run: each repeat goes through every SFU before the next."""
    return [(sfu, r) for r in range(1, repeat + 1) for sfu in sfus]


def parse_sfus(spec: str | None) -> list[str]:
    """The SFUs a --sfus list names (default: every adapter), in its order; ConfigError for others."""
    known = available_sfus()
    if not spec:
        return known
    sfus = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in sfus if s not in known]
    if unknown or not sfus:
        raise ConfigError(f"--sfus: unknown SFU {', '.join(map(repr, unknown)) or '(none given)'}; "
                          f"available: {', '.join(known)}")
    return list(dict.fromkeys(sfus))


class Study:
    def __init__(self, cfg: Config, sfus: list[str], repeat: int, out: Path, progress: Progress | None = None,
                 retry_failed: bool = False):
        self.cfg, self.sfus, self.repeat, self.out = cfg, sfus, repeat, Path(out)
        self.progress = progress or Progress()
        self.retry_failed = retry_failed
        self.local = {s: "local" in Adapter.load(s).where for s in sfus}
        self.state = self._load_state()
        self.child: subprocess.Popen | None = None
        self.signals = 0

    # -- the record --------------------------------------------------------------------------
    def _load_state(self) -> dict:
        scenario = {k: v for k, v in self.cfg.scenario().items() if k not in PER_RUN}
        path = self.out / STATE
        if path.exists():
            try:
                state = json.loads(path.read_text())
            except ValueError as e:
                raise ConfigError(f"{path} is not a study's record ({e}): give another --out") from None
            # a setting its record lacks ran as its default does (a study begun before it existed)
            recorded = {**{k: v for k, v in self.cfg.scenario_defaults().items() if k in scenario},
                        **(state.get("scenario") or {})}
            if recorded != scenario:
                differ = sorted(k for k in set(scenario) | set(recorded) if scenario.get(k) != recorded.get(k))
                raise ConfigError(f"{self.out} holds a study of another scenario (it differs in "
                                  f"{', '.join(differ)}): give another --out, or the same settings")
            return {**state, "scenario": scenario}
        return {"scenario": scenario, "runs": []}

    def _save(self) -> None:
        self.state.update(sfus=self.sfus, repeat=self.repeat)
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / (STATE + ".tmp")
        tmp.write_text(json.dumps(self.state, indent=1) + "\n")
        tmp.replace(self.out / STATE)

    def _record(self, sfu: str, repeat: int) -> dict | None:
        return next((r for r in self.state["runs"] if r["sfu"] == sfu and r["repeat"] == repeat), None)

    def _done(self, sfu: str, repeat: int) -> bool:
        r = self._record(sfu, repeat)
        if r is None:
            return False
        if r["status"] == "running":   # a study killed while it ran: adopt what the run finished
            meta = runfiles.read_meta(Path(r["run_dir"])) if r.get("run_dir") else None
            if meta and meta.get("status") in ("ok", "failed"):
                r.update(status=meta["status"], why=meta.get("error"))
            else:
                return False
        return r["status"] == "ok" or (r["status"] == "failed" and not self.retry_failed)

    # -- running -----------------------------------------------------------------------------
    def run(self) -> int:
        """Runs what is left, then builds the comparison; the exit status: 0 when every run of a local
        SFU finished, 1 when one failed, 130 when interrupted."""
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)
        try:
            todo = [(s, r) for s, r in plan([s for s in self.sfus if self.local[s]], self.repeat)
                    if not self._done(s, r)]
            self._save()
            self.out.joinpath("scenario.toml").write_text(as_toml(
                {k: v for k, v in dataclasses.asdict(self.cfg).items() if k not in PER_RUN}))
            if not todo:
                self.progress.say(f"study: nothing left to do: every run is recorded in {self.out / STATE}")
            for n, (sfu, repeat) in enumerate(todo):
                if self.signals:
                    break
                self.progress.say(f"study: run {n + 1} of {len(todo)}: {sfu}, repeat {repeat} of {self.repeat}"
                                  f" ({self._left(len(todo) - n)})")
                self._one(sfu, repeat)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
        path = self.report()
        self.progress.say(f"study: report {path}")
        if self.signals:
            self.progress.say(f"study: interrupted; run it again with --out {self.out} to go on where it stopped")
            return 130
        failed = [r for r in self.state["runs"] if r["status"] == "failed"]
        if failed:
            self.progress.say(f"study: {len(failed)} run(s) failed: "
                              + "; ".join(f"{r['sfu']} #{r['repeat']}: {r.get('why')}" for r in failed))
        return 1 if failed else 0

    def _left(self, runs: int) -> str:
        took = [r["seconds"] for r in self.state["runs"] if r.get("seconds") and r["status"] in ("ok", "failed")]
        each = sum(took) / len(took) if took else FIRST_ESTIMATE_S
        return f"about {runs * each / 60:.0f} min left" + ("" if took else ", a first guess")

    def _forward(self, signum, frame) -> None:
        """A Ctrl-C or SIGTERM goes to the running loadtest once (it tears down and keeps its run);
        a second one makes it stop at once, as it would on its own terminal."""
        self.signals += 1
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGINT)
        elif self.signals > 1:
            raise KeyboardInterrupt

    def _one(self, sfu: str, repeat: int) -> None:
        runs = self.out / "runs"
        logs = self.out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        record = self._record(sfu, repeat)
        if record is None:
            record = {"sfu": sfu, "repeat": repeat}
            self.state["runs"].append(record)
        record.update(status="running", run_dir=None, why=None, started=time.time(), seconds=None)
        self._save()
        argv = [sys.executable, "-m", "sfubench.cli", "loadtest", "--config", str(self.out / "scenario.toml"),
                "--sfu", sfu, "--out", str(runs)]
        tail: list[str] = []
        started = time.monotonic()
        with open(logs / f"{sfu}-{repeat}.log", "w") as log:
            self.child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          cwd=ROOT, start_new_session=True, bufsize=1,
                                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
            for line in self.child.stdout:
                log.write(line)
                line = line.rstrip("\n")
                tail = (tail + [line])[-20:]
                if "] run folder: " in line and not record["run_dir"]:
                    record["run_dir"] = line.split("] run folder: ", 1)[1].strip()
                    self._save()
                print(f"  {sfu} #{repeat} | {line}", flush=True)
            code = self.child.wait()
            self.child = None
        meta = runfiles.read_meta(Path(record["run_dir"])) if record["run_dir"] else None
        status = {0: "ok", 130: "interrupted"}.get(code, "failed")
        why = None
        if status != "ok":
            errors = [t.split("sfubench: error: ", 1)[1] for t in tail if "sfubench: error: " in t]
            why = (errors[-1] if errors else (meta or {}).get("error")) or f"the loadtest exited with {code}"
        record.update(status=status, why=why, seconds=round(time.monotonic() - started, 1),
                      status_code=code, run_status=(meta or {}).get("status"))
        self._save()

    # -- the comparison ----------------------------------------------------------------------
    def entries(self) -> list[study_report.Entry]:
        out = []
        for sfu in self.sfus:
            entry = study_report.Entry(sfu, asked=self.repeat if self.local[sfu] else 0)
            if not self.local[sfu]:
                data = Adapter.load(sfu).data
                entry.why.append(f"runs in the cloud only ({data.get('why_cloud', 'not installable here')}): "
                                 f"make cloud-loadtest SFU={sfu}")
            for r in sorted((r for r in self.state["runs"] if r["sfu"] == sfu and r["repeat"] <= self.repeat),
                            key=lambda r: r["repeat"]):
                if r["status"] == "ok" and r.get("run_dir"):
                    try:
                        entry.analyses.append(metrics.analyse(runfiles.load(r["run_dir"])))
                        continue
                    except (OSError, ValueError) as e:
                        r["why"] = f"its run folder cannot be read: {e}"
                if r["status"] != "running":
                    entry.why.append(f"repeat {r['repeat']}: {r['status']}" + (f": {r['why']}" if r.get("why") else ""))
            out.append(entry)
        return out

    def report(self) -> Path:
        path, results = study_report.build(self.entries(), self.out)
        self.state["results"] = results
        self._save()
        return path
