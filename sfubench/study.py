"""`sfubench study` (`make study`): the 2018 study on this machine. Every SFU, the same scenario and
the same cores, each run `repeat` times in interleaved order (A B C … A B C, so that a drift of the
machine spreads over all), then one comparison (reports/study.py).

What makes its verdict stand: one SFU budget for every run, sized to this machine before the first
(calibrate.py, unless --sfu-cpus gives it); every run started on a quiet machine (quiet.py); a run
that could not count for a passing cause (client-bound at its first count, a browser session that
would not open, a clock that kept stepping) run again, up to --retries, every attempt kept with
why; and where an SFU has fewer than two counted runs, so that nothing measures its noise and no
rank can stand, one more run of it, up to --extra-runs.

The study folder is its own record: `study.json` holds the scenario, the budget and every run as it
ends, so a study cut short (Ctrl-C, a crash) keeps its finished runs, and run again with the same
folder goes on where it stopped. Each run is a `sfubench loadtest` of its own process, in a session
of its own: an SFU that fails or a run that crashes is a row that says why, never the end of the
study. A Ctrl-C, SIGTERM or SIGHUP reaches the run once, through this process; a second one stops it at once."""
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

from . import calibrate, quiet
from .cloud import run as cloud_run, terraform
from .config import (FIELDS, ROOT, Config, ConfigError, as_toml, available_sfus, cpu_list, env_of, foreign_to,
                     redact)
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


@dataclasses.dataclass(frozen=True)
class Bounds:
    """How far the study goes to deliver a verdict: runs again of one that could not count
    (`retries` per run), and runs beyond --repeat of an SFU short of two counted ones (`extra`)."""
    retries: int = 1
    extra: int = 2
    retry_failed: bool = False   # the runs that failed for good before are run again too


def retry_reason(record: dict, a) -> str | None:
    """Why a finished run is not counted but run again, for a cause that passes, or None. `a`: its
    analysis (None when its folder gave none)."""
    events = runfiles.load(record["run_dir"]).events if record.get("run_dir") else []
    if any(e.get("event") == "browser_error" and e.get("call") == "open" for e in events):
        return "a browser session would not open"
    if record["status"] == "failed" and any(e.get("event") == "clock_stepped" for e in events):
        return "the wall clock stepped in every try of a window"
    if a is not None and a.knee.client_bound and a.knee.participants == min(
            (r["participants"] for r in a.series), default=None) and _bound_before_outage(a, events):
        return f"client-bound at its first count ({a.knee.participants}): the machine was not the run's"
    return None


def _bound_before_outage(a, events: list[dict]) -> bool:
    """Whether a client-bound window opened before the run's planned outage (a restart run's SFU
    restarted or link cut; every window where there was none): the rejoins after one are the
    outage's own aftermath, not a machine that was not the run's."""
    outage = next((e["t"] for e in events if e.get("event") in ("sfu_restart", "link_cut")), None)
    if outage is None:
        return True
    opened = {w["window"]: w.get("opened", 0) for w in a.run.windows}
    return any(h["client_bound"] and opened.get(h["window"], 0) < outage for h in a.health)


class Study:
    def __init__(self, cfg: Config, sfus: list[str], repeat: int, out: Path, progress: Progress | None = None,
                 bounds: Bounds = Bounds()):
        # absolute: the runs are started from the checkout, and their folders found from anywhere
        self.cfg, self.sfus, self.repeat, self.out = cfg, sfus, repeat, Path(out).resolve()
        self.progress = progress or Progress()
        self.bounds = bounds
        self.local = {s: "local" in Adapter.load(s).where for s in sfus}
        self.state = self._load_state()
        self.child: subprocess.Popen | None = None
        self.secret_env: dict[str, str] = {}   # settings handed to each run in its environment
        self.session: int | None = None   # the last run's, whose processes must be gone before the next
        self.signals = 0

    # -- the record --------------------------------------------------------------------------
    def _load_state(self) -> dict:
        path = self.out / STATE
        state = None
        if path.exists():
            try:
                state = json.loads(path.read_text())
            except ValueError as e:
                raise ConfigError(f"{path} is not a study's record ({e}): give another --out") from None
        if state and state.get("budget") and calibrate.needed(self.cfg):   # sized when the study began
            self.cfg = dataclasses.replace(self.cfg, sfu_cpus=state["budget"]["cores"])
        scenario = {k: v for k, v in self.cfg.scenario().items() if k not in PER_RUN}
        if state:
            # a setting its record lacks ran as its default does (a study begun before it existed)
            recorded = {**{k: v for k, v in self.cfg.scenario_defaults().items() if k in scenario},
                        **(state.get("scenario") or {})}
            if recorded != scenario:
                differ = sorted(k for k in set(scenario) | set(recorded) if scenario.get(k) != recorded.get(k))
                raise ConfigError(f"{self.out} holds a study of another scenario (it differs in "
                                  f"{', '.join(differ)}): give another --out, or the same settings")
            for record in state.get("runs", []):
                record["run_dir"] = self._found(record.get("run_dir"))
            return {**state, "scenario": scenario}
        return {"scenario": scenario, "runs": []}

    def _found(self, run_dir: str | None) -> str | None:
        """A recorded run folder as it is now: one that is not where it was recorded (a study moved,
        or one whose record holds paths from where it was started) is looked for in its runs/."""
        if not run_dir or Path(run_dir).exists():
            return run_dir
        moved = self.out / "runs" / Path(run_dir).name
        return str(moved) if moved.exists() else run_dir

    def _write_scenario(self) -> None:
        """scenario.toml, the settings each run is given: those its shape uses that are not at their
        default (an auto one as resolved here), so that a run reads as given only what the study was
        given or sized; a URL with a password goes to each run in its environment instead, never
        into a file."""
        unused = {*PER_RUN, *foreign_to(self.cfg.shape)}
        given = {k: v for k, v in dataclasses.asdict(self.cfg).items() if k not in unused and v != FIELDS[k].default}
        secret = {k for k, v in given.items() if isinstance(v, str) and redact(v) != v}
        self.secret_env = {env_of(k): given[k] for k in secret}
        self.out.joinpath("scenario.toml").write_text(as_toml({k: v for k, v in given.items() if k not in secret}))

    def _save(self) -> None:
        self.state.update(sfus=self.sfus, repeat=self.repeat)
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / (STATE + ".tmp")
        tmp.write_text(json.dumps(self.state, indent=1) + "\n")
        tmp.replace(self.out / STATE)

    def _record(self, sfu: str, repeat: int) -> dict | None:
        """The latest attempt of that run."""
        return next((r for r in reversed(self.state["runs"]) if r["sfu"] == sfu and r["repeat"] == repeat), None)

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
        if r.get("retried"):
            return r.get("attempt", 1) > self.bounds.retries
        return r["status"] == "ok" or (r["status"] == "failed" and not self.bounds.retry_failed)

    def counted(self, sfu: str) -> list[dict]:
        """The runs of `sfu` that count: finished, and not run again."""
        return [r for r in self.state["runs"] if r["sfu"] == sfu and r["status"] == "ok" and not r.get("retried")]

    # -- running -----------------------------------------------------------------------------
    def run(self) -> int:
        """Runs what is left, then builds the comparison; the exit status: 0 when every run of a local
        SFU finished, 1 when one failed, 130 when interrupted."""
        local = [s for s in self.sfus if self.local[s]]
        todo = [(s, r) for s, r in plan(local, self.repeat) if not self._done(s, r)]
        try:
            if todo and calibrate.needed(self.cfg):
                self._size_budget(local)
        except KeyboardInterrupt:   # in this process: the calibration's runs clean up after themselves
            self.progress.say(f"study: interrupted; run it again with --out {self.out} to go on where it stopped")
            return 130
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._forward)
        try:
            self._save()
            self._write_scenario()
            if not todo:
                self.progress.say(f"study: nothing left to do: every run is recorded in {self.out / STATE}")
            n = 0
            while todo and not self.signals:
                sfu, repeat = todo.pop(0)
                n += 1
                self.progress.say(f"study: run {n} of {n + len(todo)}: {sfu}, repeat {repeat} of {self.repeat}"
                                  f" ({self._left(len(todo) + 1)})")
                self._attempts(sfu, repeat)
                if not todo:
                    todo = self._extra(local)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
        path = self.report()
        self.progress.say(f"study: report {path}")
        if self.signals:
            self.progress.say(f"study: interrupted; run it again with --out {self.out} to go on where it stopped")
            return 130
        failed = [r for r in self.state["runs"] if r["status"] == "failed" and not r.get("retried")]
        if failed:
            self.progress.say(f"study: {len(failed)} run(s) failed: "
                              + "; ".join(f"{r['sfu']} #{r['repeat']}: {r.get('why')}" for r in failed))
        return 1 if failed else 0

    def _left(self, runs: int) -> str:
        took = [r["seconds"] for r in self.state["runs"] if r.get("seconds") and r["status"] in ("ok", "failed")]
        each = sum(took) / len(took) if took else FIRST_ESTIMATE_S
        return f"about {runs * each / 60:.0f} min left" + ("" if took else ", a first guess")

    def _forward(self, signum, frame) -> None:
        """A Ctrl-C, SIGTERM or SIGHUP (the session it was started from went away) goes to the running
        loadtest once (it tears down and keeps its run);
        a second one makes it stop at once, as it would on its own terminal."""
        self.signals += 1
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGINT)
        elif self.signals > 1:
            raise KeyboardInterrupt

    def _size_budget(self, sfus: list[str]) -> None:
        """One budget for every run, sized here before the first (calibrate.py)."""
        self._quiet(None)
        budget = calibrate.calibrate(self.cfg, {s: Adapter.load(s).version for s in sfus}, self.out / "calibration",
                                     self.progress)
        self.state["budget"] = budget.record()
        self.cfg = dataclasses.replace(self.cfg, sfu_cpus=budget.cores)
        self.state["scenario"]["sfu_cpus"] = budget.cores

    def _quiet(self, record: dict | None) -> None:
        """Waits for the machine to be quiet (quiet.py), saying so, and notes it in `record`."""
        cpus = cpu_list(self.cfg.sfu_cpuset) + cpu_list(self.cfg.client_cpuset) or list(range(os.cpu_count() or 1))
        q = quiet.wait(self.cfg.lab_prefix, sorted(set(cpus)), self.session,
                       lambda message: self.progress.say(f"study: {message}"))
        if not q.quiet:
            self.progress.say(f"study: the machine was not quiet after {q.seconds:.0f} s ({q.why}): running anyway")
        elif q.seconds >= quiet.IDLE_S + 1:
            self.progress.say(f"study: quiet after {q.seconds:.0f} s")
        if record is not None:
            record["quiet"] = q.record()

    def _attempts(self, sfu: str, repeat: int) -> None:
        """The run, and again while it could not count for a passing cause (up to --retries)."""
        while True:
            record = self._one(sfu, repeat)
            if self.signals or record["status"] not in ("ok", "failed"):
                return
            a = None
            if record["status"] == "ok":
                try:
                    a = metrics.analyse(runfiles.load(record["run_dir"]))
                except (OSError, ValueError):
                    pass
            why = retry_reason(record, a)
            if why is None:
                return
            record["retried"] = why
            self._save()
            if record.get("attempt", 1) > self.bounds.retries:
                self.progress.say(f"study: {sfu} #{repeat} {why}; not run again (--retries {self.bounds.retries})")
                return
            self.progress.say(f"study: {sfu} #{repeat}: {why}: running it again "
                              f"(attempt {record.get('attempt', 1) + 1} of {self.bounds.retries + 1})")

    def _extra(self, sfus: list[str]) -> list[tuple[str, int]]:
        """One more run of each SFU with one counted run, where --repeat asked for two or more (with
        one, nothing measures its noise and no rank can stand), up to --extra-runs each. (An SFU with
        none counted failed or never had headroom: more of the same would not rank it.)"""
        if self.repeat < 2:
            return []
        out = []
        for sfu in sfus:
            extra = max((r["repeat"] for r in self.state["runs"] if r["sfu"] == sfu), default=0) - self.repeat
            if len(self.counted(sfu)) == 1 and extra < self.bounds.extra:
                out.append((sfu, self.repeat + extra + 1))
        if out:
            self.progress.say("study: one counted run of " + ", ".join(s for s, _ in out)
                              + f": one more run each (at most {self.bounds.extra} beyond --repeat)")
        return out

    def _one(self, sfu: str, repeat: int) -> dict:
        runs = self.out / "runs"
        logs = self.out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        last = self._record(sfu, repeat)
        if last is None or last.get("retried"):
            record = {"sfu": sfu, "repeat": repeat, "attempt": (last or {}).get("attempt", 0) + 1}
            self.state["runs"].append(record)
        else:
            record = last
        self._quiet(record)
        record.update(status="running", run_dir=None, why=None, started=time.time(), seconds=None)
        self._save()
        argv = [sys.executable, "-m", "sfubench.cli", "loadtest", "--config", str(self.out / "scenario.toml"),
                "--sfu", sfu, "--out", str(runs)]
        tail: list[str] = []
        started = time.monotonic()
        attempt = "" if record.get("attempt", 1) == 1 else f"-{record['attempt']}"
        with open(logs / f"{sfu}-{repeat}{attempt}.log", "w") as log:
            self.child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          cwd=ROOT, start_new_session=True, bufsize=1,
                                          env={**os.environ, **self.secret_env, "PYTHONUNBUFFERED": "1"})
            self.session = self.child.pid
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
        return record

    # -- the comparison ----------------------------------------------------------------------
    def entries(self) -> list[study_report.Entry]:
        out = []
        for sfu in self.sfus:
            runs = sorted((r for r in self.state["runs"] if r["sfu"] == sfu),
                          key=lambda r: (r["repeat"], r.get("attempt", 1)))
            asked = max([self.repeat] + [r["repeat"] for r in runs]) if self.local[sfu] else 0
            adapter = Adapter.load(sfu)
            entry = study_report.Entry(sfu, asked=asked, version=adapter.version, released=adapter.released)
            if not self.local[sfu]:
                data = adapter.data
                entry.why.append(f"runs in the cloud only ({data.get('why_cloud', 'not installable here')}): "
                                 f"make cloud-loadtest SFU={sfu}")
            for r in runs:
                if r.get("retried"):
                    entry.why.append(f"repeat {r['repeat']}, attempt {r.get('attempt', 1)}: {r['retried']}"
                                     + ("; run again" if r.get("attempt", 1) <= self.bounds.retries else ""))
                    continue
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
        # priced on the one cloud the Terraform environments offer today
        offer = terraform.offer(next(iter(cloud_run.CLOUDS)))
        path, results = study_report.build(self.entries(), self.out, self.state.get("budget"), offer)
        self.state["results"] = results
        self._save()
        return path
