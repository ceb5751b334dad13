"""Reading a run folder.

A run may have crashed at any point, so every file is optional and a damaged line (typically the last,
cut short) is skipped and counted rather than failing the report.

Keys of meta.json the reports read (all optional):
  sfu       {"name", "version", "installed", "options"} or just the name
  chrome    {"version"} or the version string
  git_sha, machine (dict), media (dict), config (dict: the run's settings), scenario (dict: those of
  them that define the scenario, as the settings schema says), status, error
  cpu       CPU at target load in cores: sfu_cores, sfu_per_participant, clients_cores,
            clients_per_participant (and link_cores where the link was emulated)
`server.jsonl` (optional, from the CPU probes): {t, role ("sfu" | "clients" | "link" | "machine" | "engine"),
cpu_s (cumulative CPU seconds), cores (what the role may use), throttled_s, rss (bytes), phase, window,
edge, participants}. `windows.jsonl` (optional): one record per closed measurement window with the
clients' health in it (see reports/clientbound.py). A window marked `discarded` (the runner's wall
clock stepped in it, and it was measured again) is left out of everything read here: its record, its
probe rows and its samples; `Run.discarded` keeps its record.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

RECORD_FILES = ("checks", "events", "quality", "server", "playback", "windows", "speech")   # samples.jsonl is streamed
# a sample of the unreported kind, recognised without parsing it, as the engine and json.dumps write it
AUDIO_MARKS = (b'"kind":"audio"', b'"kind": "audio"')


@dataclass
class Run:
    path: Path
    meta: dict = field(default_factory=dict)
    checks: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    quality: list[dict] = field(default_factory=list)
    server: list[dict] = field(default_factory=list)
    playback: list[dict] = field(default_factory=list)
    windows: list[dict] = field(default_factory=list)
    speech: list[dict] = field(default_factory=list)   # the after-run scores of what browsers heard
    discarded: dict = field(default_factory=dict)      # window id -> its record, for a discarded window
    missing: list[str] = field(default_factory=list)   # file names not present
    damaged: dict[str, int] = field(default_factory=dict)  # file name -> unreadable lines

    @property
    def name(self) -> str:
        return self.path.name


def _records(path: Path, damaged: dict[str, int], keep=None, skip: tuple[bytes, ...] = ()) -> Iterator[dict]:
    """Parsed lines of a JSON-lines file; unreadable ones are counted in damaged[file name].

    `keep` (bytes) passes only lines containing it and `skip` drops lines containing any of its marks,
    both before parsing: that is what makes one phase of a large samples file cheap to look at.
    orjson because parsing is most of a report's time."""
    with open(path, "rb") as f:
        for line in f:
            if keep is not None and keep not in line:
                continue
            if any(mark in line for mark in skip) or not line.strip():
                continue
            rec = parse_line(line)
            if rec is not None:
                yield rec
            else:
                damaged[path.name] = damaged.get(path.name, 0) + 1


def parse_line(line: bytes) -> dict | None:
    """One record of a JSON-lines file, or None where the line is not one."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return rec if isinstance(rec, dict) else None


def read_jsonl(path: Path, prefilter: str | None = None) -> tuple[list[dict], int]:
    """Records of a JSON-lines file and the number of unreadable lines (see _records for `prefilter`)."""
    damaged: dict[str, int] = {}
    records = list(_records(path, damaged, prefilter.encode() if prefilter is not None else None))
    return records, damaged.get(path.name, 0)


def iter_video_samples(run: Run) -> Iterator[dict]:
    """The run's video samples, streamed from samples.jsonl (a large run's do not fit comfortably in
    memory); audio lines, which no report uses, are skipped unparsed."""
    path = run.path / "samples.jsonl"
    if path.exists():
        yield from _kept(run, _records(path, run.damaged, skip=AUDIO_MARKS))


BACKGROUND_MARKS = (b'"phase":"background"', b'"phase": "background"')


def iter_measured_samples(run: Run) -> Iterator[dict]:
    """The ramp-up and target samples, audio included (what the SFU forwarded counts both); the far
    more numerous background lines are skipped unparsed. (Damaged lines are counted once, by
    iter_video_samples.)"""
    path = run.path / "samples.jsonl"
    if path.exists():
        yield from _kept(run, _records(path, {}, skip=BACKGROUND_MARKS))


def _kept(run: Run, samples: Iterator[dict]) -> Iterator[dict]:
    """The samples of windows not discarded."""
    return (s for s in samples if s.get("window") not in run.discarded) if run.discarded else samples


def read_meta(run_dir: Path) -> dict | None:
    try:
        meta = json.loads((Path(run_dir) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def load(run_dir: str | Path) -> Run:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    run = Run(path=run_dir)
    meta = read_meta(run_dir)
    if meta is None:
        run.missing.append("meta.json")
    else:
        run.meta = meta
    if not (run_dir / "samples.jsonl").exists():
        run.missing.append("samples.jsonl")
    for name in RECORD_FILES:
        path = run_dir / f"{name}.jsonl"
        if not path.exists():
            run.missing.append(path.name)
            continue
        setattr(run, name, sorted(_records(path, run.damaged), key=lambda r: r.get("t") or 0))
    run.discarded = {w.get("window"): w for w in run.windows if w.get("discarded")}
    if run.discarded:
        for name in ("windows", "server", "playback", "quality", "speech"):
            setattr(run, name, [r for r in getattr(run, name) if r.get("window") not in run.discarded])
    return run


def identity(meta: dict, run_dir: Path) -> dict:
    """SFU name/version/release date/options, Chrome version, git sha, machine — whatever meta holds."""
    sfu = meta.get("sfu")
    if isinstance(sfu, dict):
        name, version, options = sfu.get("name"), sfu.get("version"), sfu.get("options") or {}
        released = sfu.get("released")
    else:
        name, version, options, released = sfu, None, {}, None
    if not name:
        # the folder is named <UTC timestamp>-<sfu>
        name = Path(run_dir).name.split("-", 1)[-1]
    chrome = meta.get("chrome")
    if isinstance(chrome, dict):
        chrome = chrome.get("version")
    return {
        "run": Path(run_dir).name,
        "sfu": str(name),
        "version": version,
        "released": released,
        "options": options,
        "chrome": chrome,
        "git_sha": meta.get("git_sha"),
        "machine": meta.get("machine") or {},
        "config": meta.get("config") or {},
        "scenario": meta.get("scenario") if isinstance(meta.get("scenario"), dict) else None,
        "scenario_defaults": meta.get("scenario_defaults") if isinstance(meta.get("scenario_defaults"), dict) else {},
        "media": meta.get("media") or {},
        "cpu": meta.get("cpu") or {},
    }
