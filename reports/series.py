"""Per participant count: the rows the report's curves and the knee rule read, one per count measured,
from the windows, the checks, the quality and playback records, the probes and the windows' health."""
from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable

from . import clientbound, runfiles
from .clientbound import ClientRule
from .stats import playback_stats, quality_stats, stream_stats
from .windows import MEASURED, Totals, members, probe_edges, sample_time, viewers


def stream_series(obs: list[dict]) -> list[dict]:
    """Per participant count, the aggregates of `stream_stats` over the ramp-up and target observations
    (background ones are folded into `Totals` instead)."""
    groups: dict[int, list[dict]] = defaultdict(list)
    for o in obs:
        if o["phase"] in MEASURED and o["participants"] is not None:
            groups[o["participants"]].append(o)
    return [{"participants": p, **stream_stats(groups[p])} for p in sorted(groups)]


def window_series(totals: dict[tuple, Totals]) -> list[dict]:
    """One row per window in time order (t = its last sample): the run as it unfolded."""
    rows = [{"t": w.t, "phase": phase, "window": window, "participants": w.participants, **w.row()}
            for (phase, window), w in totals.items() if w.t is not None]
    return sorted(rows, key=sample_time)


def _pooled(totals: Iterable[Totals]) -> dict[int, Totals]:
    by_count: dict[int, Totals] = defaultdict(Totals)
    for w in totals:
        if w.participants is not None:
            by_count[w.participants].merge(w)
    return by_count


def background_series(totals: dict[tuple, Totals]) -> list[dict]:
    """Means of the background windows by participant count."""
    by_count = _pooled(w for (phase, _), w in totals.items() if phase == "background")
    return [{"participants": p, **by_count[p].row()} for p in sorted(by_count)]


def freeze_series(totals: dict[tuple, Totals]) -> list[dict]:
    """Received video freezes per stream-minute by participant count, over every window at that count.

    Freezes are rare events: counted over the 1-s ramp-up windows alone they are noise, so background
    ticks (longer, all participants) at the same count are pooled in — at the counts ramp-up and target
    measured, which are the series' points."""
    counts = {w.participants for (phase, _), w in totals.items() if phase in MEASURED}
    by_count = _pooled(w for w in totals.values() if w.participants in counts)
    return [{"participants": p, "freezes_per_min": by_count[p].freezes / (by_count[p].freeze_s / 60.0)}
            for p in sorted(by_count) if by_count[p].freeze_s]


def quality_series(quality: list[dict]) -> list[dict]:
    groups: dict[int, list[dict]] = defaultdict(list)
    for q in quality:
        if q.get("participants") is not None:
            groups[q["participants"]].append(q)
    return [{"participants": p, **quality_stats(groups[p])} for p in sorted(groups)]


def playback_series(playback: list[dict]) -> list[dict]:
    groups: dict[int, list[dict]] = defaultdict(list)
    for r in playback:
        if r.get("participants") is not None:
            groups[r["participants"]].append(r)
    out = []
    for p in sorted(groups):
        stats = playback_stats(groups[p])
        if stats:
            out.append({"participants": p, **stats})
    return out


def timeline(events: list[dict]) -> list[tuple[float, int]]:
    """(t, participants started) at each event that carries a count, in time order."""
    return sorted((e["t"], e["participants"]) for e in events
                  if e.get("t") is not None and e.get("participants") is not None)


def participants_at(tl: list[tuple[float, int]], t: float) -> int:
    i = bisect.bisect_right(tl, (t, math.inf))
    return tl[i - 1][1] if i else 0


def room_participants(events: list[dict]) -> dict:
    """room -> participants started once the room was up (its room_validated / room_timeout event)."""
    return {e.get("room"): e["participants"] for e in events
            if e.get("event") in ("room_validated", "room_timeout") and e.get("participants") is not None}


def check_series(checks: list[dict], events: list[dict]) -> list[dict]:
    """Video-check pass rate by participant count. A check counts at the load it ran at (its
    `participants`: a room validated again at each step of a broadcast, or of a knee narrowed down,
    counts at each); in run folders from before checks said so, at the load its room's ramp step was
    measured at (the room's validation event), or else at the count when it ran."""
    tl, rooms = timeline(events), room_participants(events)
    groups: dict[int, list[bool]] = defaultdict(list)
    for c in checks:
        p = c.get("participants") or rooms.get(c.get("room"))
        if p is None and c.get("t") is not None:
            p = participants_at(tl, c["t"])
        if p is not None:
            groups[p].append(bool(c.get("ok")))
    return [{"participants": p, "checks": len(v), "check_pass_rate": sum(v) / len(v)}
            for p, v in sorted(groups.items())]


def merge_series(*series: list[dict]) -> list[dict]:
    rows: dict[int, dict] = {}
    for s in series:
        for r in s:
            rows.setdefault(r["participants"], {"participants": r["participants"]}).update(r)
    return [rows[p] for p in sorted(rows)]


def room_checks(checks: list[dict]) -> list[dict]:
    rooms: dict = defaultdict(Counter)
    for c in checks:
        rooms[c.get("room")][c.get("verdict") or ("playing" if c.get("ok") else "unknown")] += 1
        rooms[c.get("room")]["_passed"] += bool(c.get("ok"))
    out = []
    for room in sorted(rooms, key=lambda r: (r is None, r)):
        counts = rooms[room]
        passed = counts.pop("_passed")
        total = sum(counts.values())
        out.append({"room": room, "checks": total, "passed": passed,
                    "pass_rate": passed / total if total else None, "verdicts": dict(counts)})
    return out


def server_series(server: list[dict], tl: list[tuple[float, int]]) -> list[dict]:
    """Per participant count and probe role (`sfu`; `clients` = the browsers): CPU in cores, from the
    cumulative `cpu_s` between consecutive rows of the role (time-weighted), and mean RSS in bytes.
    Keys `<role>_cpu`, `<role>_cpu_per_participant`, `<role>_rss`; rows without a role are the SFU's."""
    by_role: dict[str, list[dict]] = defaultdict(list)
    for r in server:
        if r.get("t") is not None:
            by_role[r.get("role") or "sfu"].append(r)
    acc: dict[tuple[str, int], list] = defaultdict(lambda: [0.0, 0.0, []])   # cpu seconds, seconds, rss
    for role, rows in by_role.items():
        rows.sort(key=sample_time)
        prev = None
        for r in rows:
            p = r.get("participants")
            a = acc[(role, participants_at(tl, r["t"]) if p is None else p)]
            if r.get("rss") is not None:
                a[2].append(r["rss"])
            if prev is not None and r.get("cpu_s") is not None and prev.get("cpu_s") is not None:
                dt = (r["t"] - prev["t"]) / 1000.0
                if dt > 0 and r["cpu_s"] >= prev["cpu_s"]:
                    a[0] += r["cpu_s"] - prev["cpu_s"]
                    a[1] += dt
            prev = r
    rows: dict[int, dict] = {}
    for (role, p), (cpu_s, seconds, rss) in acc.items():
        row = rows.setdefault(p, {"participants": p})
        if seconds:
            row[f"{role}_cpu"] = cpu_s / seconds
            if p:
                row[f"{role}_cpu_per_participant"] = cpu_s / seconds / p
        if rss:
            row[f"{role}_rss"] = sum(rss) / len(rss)
    return [rows[p] for p in sorted(rows)]


def viewer_series(events: list[dict], server: list[dict]) -> list[dict]:
    """Per participant count at which any of the first that many started only watch (a broadcast's
    audience): the viewers, and the SFU's CPU per viewer from `server` (server_series' rows)."""
    started, watching = members(events), viewers(events)
    out = []
    for r in server:
        n = sum(user in watching for user, _, _ in started[:r["participants"] or 0])
        if n:
            out.append({"participants": r["participants"], "viewers": n,
                        **({"sfu_cpu_per_viewer": r["sfu_cpu"] / n} if r.get("sfu_cpu") is not None else {})})
    return out


def window_health(run: runfiles.Run, obs: list[dict], rule: ClientRule = ClientRule()) -> list[dict]:
    """Per ramp-up, target and network window (windows.jsonl), whether its clients were the limit
    and why: a figure measured under a degraded network is no truer of the SFU for it."""
    edges = probe_edges(run.server)
    fps: dict = defaultdict(list)
    for o in obs:
        if o["direction"] == "send" and o["fps"] is not None and o.get("limit") != "bandwidth":
            fps[o["window"]].append(o["fps"])
    source = (run.meta.get("media") or {}).get("fps")
    interval = (run.meta.get("config") or {}).get("sample_interval")
    out = []
    for w in run.windows:
        if w.get("phase") not in (*MEASURED, "network", "storm"):
            continue
        at = edges.get(w.get("window"), {})
        strain = clientbound.assess(w, at, fps.get(w.get("window"), []), source, interval, rule)
        saturated = clientbound.sfu_saturated(at, rule) if strain else ""
        reasons = [] if saturated else strain
        # a remote grid's browsers run on its nodes: no probe of this run saw their CPU
        probed = "clients" in at
        out.append({"t": w.get("t"), "phase": w.get("phase"), "window": w.get("window"),
                    "participants": w.get("participants"), "client_bound": bool(reasons), "reasons": reasons,
                    "overruled": f"{saturated} (the clients: {'; '.join(strain)})" if saturated else "",
                    "cpu_probed": probed, "duration_s": w.get("duration_s"),
                    "clients_busy": clientbound.busy_share(at, "clients"),
                    **{f"{role}_throttled": clientbound.throttled_share(at, role)
                       for role in ("sfu", "clients")}})
    return out


def health_series(health: list[dict]) -> list[dict]:
    """Per participant count: client-bound if any of its windows was, with that window's reasons,
    and `headroom` if any of its windows showed the clients no strain at all (not even one the
    SFU's saturation overruled). The windows under the run's own network: those of the
    participant curves; a join storm's, at its own count."""
    rows: dict[int, dict] = {}
    for h in health:
        p = h["participants"]
        if p is None or h["phase"] not in (*MEASURED, "storm"):
            continue
        row = rows.setdefault(p, {"participants": p, "client_bound": False, "headroom": False})
        if h["client_bound"] and not row["client_bound"]:
            row.update(client_bound=True, client_reasons="; ".join(h["reasons"]))
        if not h["client_bound"] and not h.get("overruled"):
            row["headroom"] = True
    return [rows[p] for p in sorted(rows)]
