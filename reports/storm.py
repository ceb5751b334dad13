"""What each join storm did (the join-storm shape, sfubench/shapes/join_storm.py): how long its
newcomers took from their join to the first frame of each video they receive (the checks'
`first_frame_s`: from the later of the two joins until the receiver got the video's first frame),
the joins that failed or whose videos did not all play within the storm's time, the SFU's CPU while
it lasted, and how the rooms already running fared in the storm's window (their freezes and loss).

A storm is a step of its own participant count (the background's and the storm's), so the storm
knee is found as any knee (reports/knee.py), by StormRule: the first storm whose 95th percentile
passes the bound, or in which a join failed, at that storm and the next one measured."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from . import catalog
from .stats import percentile
from .table import Table, rounded
from .windows import probe_edges

FIGURES = [f for f in catalog.STEP_FIGURES if f.section == "storm"]


@dataclass(frozen=True)
class StormRule:
    first_frame_s: float = 3.0   # the newcomers' 95th percentile, join to first frame
    name: ClassVar[str] = "storm knee"

    def criteria(self) -> tuple:
        """(series key, criterion, is bad, says why), as KneeRule.criteria()."""
        return (
            ("first_frame_p95_s", "first_frame", lambda v: v > self.first_frame_s,
             lambda v: f"the storm's 95th-percentile time to a first frame, {v:.2f} s, is above "
                       f"{self.first_frame_s:g} s"),
            ("joins_failed", "joins", lambda v: v > 0,
             lambda v: f"{v:.0f} of the storm's joins failed or did not play every video in time"),
        )

    def text(self) -> str:
        return ("The storm knee is the first storm (its participants all joining at once, on the rooms already "
                "running) at which — at that storm and at the next one measured — the 95th percentile of the "
                "newcomers' time from their join to the first frame of each video passes "
                f"{self.first_frame_s:g} s, or a join fails (its participant failed, or a video of theirs did not "
                "play within the storm's time). Storms measured from the first client-bound one on are not judged.")


def storm_series(checks: list[dict], events: list[dict], windows: list[dict] = (),
                 server: list[dict] = ()) -> list[dict]:
    """One row per storm, at its step's participant count: its size, joins, those that failed,
    first-frame percentiles; with the storm window's rows of `windows` (reports.series.window_series)
    and server.jsonl's `server` rows, the SFU's cores during it and the background's freezes and loss."""
    storms = {e["participants"] + e["storm"]: e for e in events
              if e.get("event") == "storm_started" and isinstance(e.get("storm"), int)}
    by_count: dict[int, list[dict]] = defaultdict(list)
    for c in checks:
        if c.get("participants") in storms and c.get("user") != c.get("peer"):
            by_count[c["participants"]].append(c)
    during = {w["participants"]: w for w in windows if w.get("phase") == "storm"}
    cores = _storm_cores(server)
    rows = []
    for count, e in sorted(storms.items()):
        mine = by_count[count]
        joins = {c["user"] for c in mine}
        failed = {c["user"] for c in mine if not c.get("ok")}
        times = [c["first_frame_s"] for c in mine if c.get("ok") and c.get("first_frame_s") is not None]
        w = during.get(count, {})
        rows.append({
            "participants": count, "storm": e["storm"], "joins": len(joins), "joins_failed": len(failed),
            "first_frame_p50_s": percentile(times, 50), "first_frame_p95_s": percentile(times, 95),
            "first_frame_p99_s": percentile(times, 99), "first_frame_max_s": max(times, default=None),
            "storm_sfu_cores": cores.get(count),
            "storm_background_freezes_per_min": w.get("freezes_per_min"),
            "storm_background_loss_pct": w.get("loss_pct"),
        })
    return rows


def _storm_cores(server: list[dict]) -> dict[int, float]:
    """The SFU's cores over each storm window, by its participant count."""
    out = {}
    for roles in probe_edges(r for r in server if r.get("phase") == "storm").values():
        start, end = roles.get("sfu", {}).get("start"), roles.get("sfu", {}).get("end")
        if start and end and end.get("t", 0) > start.get("t", 0) and end.get("cpu_s") is not None \
                and start.get("cpu_s") is not None:
            out[end["participants"]] = (end["cpu_s"] - start["cpu_s"]) / ((end["t"] - start["t"]) / 1000)
    return out


def storm_table(series: list[dict]) -> Table:
    """The report's join storms: every figure the catalogue puts in their section, one row a storm."""
    rows = [[r["participants"], *(rounded(r[f.name] * f.scale, f.digits) if r.get(f.name) is not None else None
                                  for f in FIGURES)] for r in series if r.get("storm") is not None]
    return Table("storms", "Join storms", ["participants", *(f.name for f in FIGURES)], rows,
                 note="Participants: the rooms already running and the storm's. Each storm's participants all "
                      "join at once, into rooms of their own, and leave before the next storm; its window "
                      "measures the rooms already running while they join.")


def study_table(runs: dict[str, list]) -> Table:
    """Each SFU's storms side by side: a row per run (reports.metrics.Analysis) and storm."""
    rows = [[sfu, i, r["participants"], *(rounded(r[f.name] * f.scale, f.digits) if r.get(f.name) is not None
                                           else None for f in FIGURES)]
            for sfu, analyses in runs.items() for i, a in enumerate(analyses, 1)
            for r in a.series if r.get("storm") is not None]
    return Table("study-storms", "Each SFU's join storms", ["sfu", "repeat", "participants", *(f.name for f in FIGURES)],
                 rows, note="One row per run and storm; participants: the rooms already running and the storm's.")
