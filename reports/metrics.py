"""A whole run: its analysis (every series, table and rule over its records), the headline figures it
is ranked and tracked by, and the cheap end-of-run summary for the terminal."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from . import catalog, runfiles
from .audio import AudioKneeRule, audio_series, audio_stats, speech_series, speech_stats
from .clientbound import ClientRule
from .cost import cost_series
from .knee import Knee
from .knee import KneeRule
from .knee import as_stopped, find_knee
from .series import background_series, check_series, freeze_series, health_series, merge_series, playback_series, quality_series, room_checks, server_series, stream_series, timeline, viewer_series, window_health, window_series
from .stats import describe, playback_stats, quality_stats, stream_stats
from .table import Table
from .tables import study_tables
from .samples import SampleFold
from .storm import StormRule, storm_series
from .windows import missing_streams, stream_windows


@dataclass
class Analysis:
    run: runfiles.Run
    ident: dict
    obs: list[dict]             # ramp and target video observations (background ones are in `windows`)
    audio: list[dict]           # ramp and target audio observations
    timeline: list[tuple[float, int]]
    series: list[dict]          # ramp + target, by participant count
    background: list[dict]      # background windows, by participant count
    windows: list[dict]         # every window in time order
    server: list[dict]
    rooms: list[dict]
    tables: list[Table]
    knee: Knee
    rule: KneeRule              # or, for a run of join storms, StormRule
    audio_knee: Knee = Knee()
    audio_rule: AudioKneeRule = AudioKneeRule()
    health: list[dict] = field(default_factory=list)   # per ramp-up / target window: client-bound?
    cost: list[dict] = field(default_factory=list)     # what the SFU spent per forwarded packet, by count
    client_rule: ClientRule = ClientRule()
    headline: dict = field(default_factory=dict)


def run_status(events: list[dict]) -> str | None:
    for e in reversed(events):
        if e.get("event") == "run_finished":
            return e.get("status")
    return None


def headline(a: Analysis) -> dict:
    """The numbers a run is ranked and tracked by. None where not measured."""
    run = a.run
    target = [o for o in a.obs if o["phase"] == "target"]
    at = stream_stats(target) if target else {}
    tq = quality_stats([q for q in run.quality if q.get("phase") == "target"])
    tp = playback_stats([r for r in run.playback if r.get("phase") == "target"])
    ta = audio_stats([o for o in a.audio if o["phase"] == "target"])
    heard = speech_stats([r for r in run.speech if r.get("phase") == "target"])
    sources = {"streams": at, "quality": tq, "playback": tp, "audio": ta, "speech": heard}   # catalogue `source`s
    bound = [h for h in a.health if h["phase"] == "target" and h["client_bound"]]
    started = [p for _, p in a.timeline]
    target_participants = max((o["participants"] for o in target if o["participants"]), default=None)
    checks = [bool(c.get("ok")) for c in run.checks]
    # CPU at target: the engine's figure in meta.json (from the probe at the target window's edges), else
    # the probe rows at the target participant count
    cpu, at_target = a.ident["cpu"], next((r for r in a.server if r["participants"] == target_participants), {})
    row = next((r for r in a.series if r["participants"] == target_participants), {})
    participants = max(started, default=0) or max((w["participants"] or 0 for w in a.windows), default=None)
    return {
        # the series' own figures (CPU, memory, cost) at the target count; those named below are the run's
        **{f.name: row.get(f.name) for f in catalog.FIGURES if f.series and not f.source and f.name in row},
        "participants": participants,
        "target_participants": target_participants,
        "status": run_status(run.events),
        "knee": a.knee.participants,
        "knee_criterion": a.knee.criterion,
        "audio_knee": a.audio_knee.participants,
        "audio_knee_criterion": a.audio_knee.criterion,
        "coped": coped(a, participants),
        **{f.name: sources[f.source].get(f.name) for f in catalog.FIGURES if f.source in sources},
        **{key: sources[f.source].get(key) for key, f in catalog.percentiles().items()},
        "code_fps": tp.get("code_fps"),
        "stream_failure_rate": at.get("stream_failure_rate"),
        "target_client_bound": bool(bound) if any(h["phase"] == "target" for h in a.health) else None,
        "client_bound": float(bool(a.knee.client_bound or bound)),
        "client_reasons": "; ".join(bound[0]["reasons"]) if bound else None,
        "check_pass_rate": sum(checks) / len(checks) if checks else None,
        "checks": len(checks),
        "server_cpu_per_participant": cpu.get("sfu_per_participant", at_target.get("sfu_cpu_per_participant")),
        "client_cpu_per_participant": cpu.get("clients_per_participant",
                                              at_target.get("clients_cpu_per_participant")),
    }


def ending_knee(a: Analysis, which: str = "video") -> Knee:
    """The knee that ends a ramp (the `knee` setting): the video one, the audio one, or whichever
    of them comes first ("both")."""
    knees = {"video": [a.knee], "audio": [a.audio_knee], "both": [a.knee, a.audio_knee]}[which]
    found = [k for k in knees if k.participants is not None]
    return min(found, key=lambda k: k.participants) if found else knees[0]


def coped(a: Analysis, participants: int | None = None) -> int:
    """The load an SFU coped with: the last count measured before its knee (the one the run stopped on
    where its last windows take it back: Knee.judged), or the participants reached (`participants`,
    else the headline's) when it has none."""
    if a.knee.judged is None:
        return (participants if participants is not None else a.headline.get("participants")) or 0
    return max((r["participants"] for r in a.series if r["participants"] < a.knee.judged), default=0)


def analyse(run: runfiles.Run, rule: KneeRule = KneeRule(), client_rule: ClientRule = ClientRule(),
            samples: SampleFold | None = None) -> Analysis:
    """`samples`: the run's samples.jsonl as folded so far by whoever reads it as it grows (else it is
    read here, to its end). A run of join storms is judged by StormRule instead of `rule`."""
    if samples is None:
        samples = SampleFold(run.path / "samples.jsonl", run.discarded).read()
    if samples.damaged:
        run.damaged["samples.jsonl"] = samples.damaged
    obs, totals = samples.observations()
    obs += missing_streams(obs, run.events, run.windows)
    heard = samples.audio_observations()
    tl = timeline(run.events)
    health = window_health(run, obs, client_rule)
    cost = cost_series(run, samples.spans)
    server = server_series(run.server, tl)
    windows = window_series(totals)
    storms = storm_series(run.checks, run.events, windows, run.server)
    if storms:
        rule = StormRule()
    series = merge_series(stream_series(obs), freeze_series(totals), quality_series(run.quality),
                          playback_series(run.playback), check_series(run.checks, run.events),
                          health_series(health), cost, server, audio_series(heard), speech_series(run.speech),
                          storms, viewer_series(run.events, server))
    a = Analysis(
        run=run,
        ident=runfiles.identity(run.meta, run.path),
        obs=obs,
        audio=heard,
        timeline=tl,
        series=series,
        background=background_series(totals),
        windows=windows,
        server=server,
        rooms=room_checks(run.checks),
        tables=study_tables(obs),
        knee=as_stopped(find_knee(series, rule), run.events),
        rule=rule,
        audio_knee=as_stopped(find_knee(series, AudioKneeRule()), run.events),
        health=health,
        client_rule=client_rule,
        cost=cost,
    )
    a.headline = headline(a)
    return a


def summary(run_dir: str | Path) -> dict:
    """Cheap end-of-run numbers for the terminal: per-participant video bitrates at target and checks.

    Only target samples are parsed (a text prefilter skips the rest of samples.jsonl)."""
    run_dir = Path(run_dir)
    samples = checks = events = []
    if (run_dir / "samples.jsonl").exists():
        samples, _ = runfiles.read_jsonl(run_dir / "samples.jsonl", prefilter='"target"')
        samples = [s for s in samples if s.get("phase") == "target"]
    if (run_dir / "checks.jsonl").exists():
        checks, _ = runfiles.read_jsonl(run_dir / "checks.jsonl")
    if (run_dir / "events.jsonl").exists():
        events, _ = runfiles.read_jsonl(run_dir / "events.jsonl")
    obs = [o for o in stream_windows(samples) if o["kind"] == "video" and o["bps"] is not None]
    send: dict[str, list[float]] = defaultdict(list)
    recv: dict[tuple, float] = defaultdict(float)
    for o in obs:
        if o["direction"] == "send":
            send[o["user"]].append(o["bps"])
        else:
            recv[(o["window"], o["user"])] += o["bps"]
    recv_user: dict[str, list[float]] = defaultdict(list)
    for (_, user), bps in recv.items():
        recv_user[user].append(bps)
    ok = sum(1 for c in checks if c.get("ok"))
    return {
        "run": run_dir.name,
        "status": run_status(events),
        "participants": max((e.get("participants") or 0 for e in events), default=0),
        "target": {
            "participants": max((s.get("participants") or 0 for s in samples), default=0),
            "send_video_bps": describe([sum(v) / len(v) for v in send.values()]),
            "recv_video_bps": describe([sum(v) / len(v) for v in recv_user.values()]),
            "recv_video_stream_bps": describe([o["bps"] for o in obs if o["direction"] == "recv"]),
        } if samples else None,
        "checks": {
            "total": len(checks),
            "passed": ok,
            "failed": len(checks) - ok,
            "pass_rate": ok / len(checks) if checks else None,
            "verdicts": dict(Counter(c.get("verdict") for c in checks)),
        },
    }
