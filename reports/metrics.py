"""Pure functions over a run's records (schemas in docs/contracts.md).

Units inside: bit/s, ms, fractions. Tables convert to Mbps / ms / percent for display and export.
"""
from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from . import clientbound, runfiles
from .clientbound import ClientRule
from .knee import Knee, KneeRule, find_knee

BITRATE_THRESHOLD_BPS = 1e6   # the study's "share above 1 Mbps"
RTT_THRESHOLD_MS = 50.0       # the study's "share above 50 ms"
MEASURED = ("ramp", "target")


# ---------------------------------------------------------------- per-stream windows

def stream_key(s: dict) -> tuple:
    return s.get("user"), s.get("peer"), s.get("direction"), s.get("kind"), s.get("ssrc")


def _n(v) -> float | None:
    """v if it is a finite number, else None: a browser's getStats (or a damaged file) may hold
    nulls, strings or NaN, and none of them may turn into a figure. (v - v is 0 only for finite v.)"""
    return v if type(v) in (int, float) and v - v == 0 else None


def bitrate(first: dict, last: dict) -> float | None:
    """The study's bitrate: Δbytes × 8000 / Δt (t in ms) → bit/s; None when it cannot be known."""
    t0, t1, b0, b1 = _n(first.get("t")), _n(last.get("t")), _n(first.get("bytes")), _n(last.get("bytes"))
    if t0 is None or t1 is None or b0 is None or b1 is None:
        return None
    dt, db = t1 - t0, b1 - b0
    if dt <= 0 or db < 0:   # db < 0: the counter restarted (new connection)
        return None
    return db * 8000.0 / dt


def _delta(first: dict, last: dict, key: str) -> float | None:
    a, b = _n(first.get(key)), _n(last.get(key))
    if a is None or b is None or b < a:
        return None
    return b - a


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _avg(samples: list[dict], key: str) -> float | None:
    """Mean of one field over a window's samples; a plain loop because it runs for every stream window."""
    total, n = 0.0, 0
    for s in samples:
        v = _n(s.get(key))
        if v is not None:
            total += v
            n += 1
    return total / n if n else None


def _observe(first: dict | None, last: dict, within: list[dict], phase, window) -> dict:
    """One stream in one window. `first` is None when there is nothing to take differences from.
    Written for speed: it runs once per stream and window (~200k times for 500 participants)."""
    get = last.get
    obs = {"phase": phase, "window": window, "participants": get("participants"), "t": _n(get("t")),
           "room": get("room"), "user": get("user"), "peer": get("peer"), "direction": get("direction"),
           "kind": get("kind"), "client": get("client") or "browser", "bps": None, "dt": None, "lost": None, "expected": None, "freezes": None,
           "limit": get("qualityLimitationReason")}
    if len(within) == 1:
        rtt, jitter = _n(get("rtt")), _n(get("jitter"))
        obs["rtt"] = [rtt * 1000.0] if rtt is not None else []
        obs["fps"] = _n(get("framesPerSecond"))
    else:
        obs["rtt"] = [r * 1000.0 for s in within if (r := _n(s.get("rtt"))) is not None]
        jitter = _avg(within, "jitter")
        obs["fps"] = _avg(within, "framesPerSecond")
    obs["jitter_ms"] = jitter * 1000.0 if jitter is not None else None
    if first is not None and first is not last:
        obs["bps"] = bitrate(first, last)
        t0, t1 = _n(first.get("t")), obs["t"]
        if t0 is not None and t1 is not None:
            obs["dt"] = (t1 - t0) / 1000.0
        lost, packets = _delta(first, last, "packetsLost"), _delta(first, last, "packets")
        if lost is not None and packets is not None:
            obs["lost"] = lost
            # received packets do not count the lost ones; sent packets do
            obs["expected"] = packets + lost if get("direction") == "recv" else packets
        obs["freezes"] = _delta(first, last, "freezeCount")
    return obs


def iter_stream_windows(samples: Iterable[dict], kinds: tuple[str, ...] | None = ("video",)) -> Iterator[dict]:
    """One observation per (window, stream) of the given kinds (None: all). The reports are about video;
    leaving audio out halves the work.

    Ramp and target windows: bitrate etc. between the window's first and last samples of the stream.
    Background windows hold one sample per stream, so differences are taken from the stream's previous
    background sample; the stream's first background sample only gives instantaneous values.
    Background observations come out as the samples stream in (a long run has millions: they are not all
    kept); ramp and target ones once the samples are exhausted. Samples are expected in time order per
    stream, as the collector appends them."""
    measured: dict[tuple, list[dict]] = {}
    previous: dict[tuple, dict] = {}
    for s in samples:
        if kinds is not None and s.get("kind") not in kinds:
            continue
        key = stream_key(s)
        if s.get("phase") == "background":
            yield _observe(previous.get(key), s, [s], "background", s.get("window"))
            previous[key] = s
        else:
            measured.setdefault((s.get("phase"), s.get("window"), key), []).append(s)
    for (phase, window, _), group in measured.items():
        group.sort(key=_time)
        yield _observe(group[0], group[-1], group, phase, window)


def stream_windows(samples: Iterable[dict], kinds: tuple[str, ...] | None = ("video",)) -> list[dict]:
    return list(iter_stream_windows(samples, kinds))


def _time(s: dict) -> float:
    return s.get("t") or 0


def members(events: list[dict]) -> list[tuple[str, object, str]]:
    """(user, room, kind of client) of every participant started, in order."""
    started = sorted((e for e in events if e.get("event") == "participant_started" and e.get("user")),
                     key=_time)
    return [(e["user"], e.get("room"), e.get("client") or "browser") for e in started]


def missing_streams(obs: list[dict], events: list[dict], windows: list[dict] = ()) -> list[dict]:
    """A zero-bitrate observation for every video stream a measured window should have had and did
    not: each of the first `participants` started sends one and receives one from every other member
    of its room. So a failed participant, a browser given up or a stream the SFU never delivered
    counts as a failed stream in every figure, instead of vanishing from the averages. The windows
    are those of windows.jsonl (so one in which no sample arrived at all counts too), else those
    the observations show."""
    started = members(events)
    if not started:
        return []
    seen: dict[tuple, set] = defaultdict(set)
    measured: dict[tuple, dict] = {(w.get("phase"), w.get("window")): w for w in windows
                                   if w.get("phase") in MEASURED}
    for o in obs:
        if o["phase"] in MEASURED and o["kind"] == "video":
            key = (o["phase"], o["window"])
            measured.setdefault(key, o)
            seen[key].add((o["user"], o["peer"], o["direction"]))
    out = []
    for key, first in measured.items():
        present = started[:first.get("participants") or 0]
        room_of = {user: room for user, room, _ in present}
        client_of = {user: client for user, _, client in present}
        rooms: dict = defaultdict(list)
        for user, room, _ in present:
            rooms[room].append(user)
        for users in rooms.values():
            for user in users:
                want = [(user, None, "send")] + [(user, peer, "recv") for peer in users if peer != user]
                for u, peer, direction in want:
                    if (u, peer, direction) not in seen[key]:
                        out.append({**{k: first.get(k) for k in ("phase", "window", "participants", "t")},
                                    "room": room_of[u], "user": u, "peer": peer, "client": client_of[u],
                                    "direction": direction, "kind": "video", "bps": 0.0, "dt": None,
                                    "lost": None, "expected": None, "freezes": None, "limit": None,
                                    "rtt": [], "fps": None, "jitter_ms": None, "missing": True})
    return out


def window_health(run: runfiles.Run, obs: list[dict], rule: ClientRule = ClientRule()) -> list[dict]:
    """Per ramp-up, target and network window (windows.jsonl), whether its clients were the limit
    and why: a figure measured under a degraded network is no truer of the SFU for it."""
    edges: dict = defaultdict(lambda: defaultdict(dict))
    for r in run.server:
        if r.get("edge") in ("start", "end") and r.get("window") is not None:
            edges[r["window"]][r.get("role") or "sfu"][r["edge"]] = r
    fps: dict = defaultdict(list)
    for o in obs:
        if o["direction"] == "send" and o["fps"] is not None and o.get("limit") != "bandwidth":
            fps[o["window"]].append(o["fps"])
    source = (run.meta.get("media") or {}).get("fps")
    interval = (run.meta.get("config") or {}).get("sample_interval")
    out = []
    for w in run.windows:
        if w.get("phase") not in (*MEASURED, "network"):
            continue
        reasons = clientbound.assess(w, edges.get(w.get("window"), {}), fps.get(w.get("window"), []), source,
                                     interval, rule)
        # a remote grid's browsers run on its nodes: no probe of this run saw their CPU
        probed = "clients" in edges.get(w.get("window"), {})
        out.append({"t": w.get("t"), "phase": w.get("phase"), "window": w.get("window"),
                    "participants": w.get("participants"), "client_bound": bool(reasons), "reasons": reasons,
                    "cpu_probed": probed, "duration_s": w.get("duration_s"),
                    **{f"{role}_throttled": clientbound.throttled_share(edges.get(w.get("window"), {}), role)
                       for role in ("sfu", "clients")}})
    return out


def health_series(health: list[dict]) -> list[dict]:
    """Per participant count: client-bound if any of its windows was, with that window's reasons
    (the windows under the run's own network: those of the participant curves)."""
    rows: dict[int, dict] = {}
    for h in health:
        p = h["participants"]
        if p is None or h["phase"] not in MEASURED:
            continue
        row = rows.setdefault(p, {"participants": p, "client_bound": False})
        if h["client_bound"] and not row["client_bound"]:
            row.update(client_bound=True, client_reasons="; ".join(h["reasons"]))
    return [rows[p] for p in sorted(rows)]


# ---------------------------------------------------------------- statistics

def describe(values, threshold: float | None = None) -> dict:
    """The study's table cells: min of the values > 0, max, average (of all) and share above threshold."""
    values = [v for v in values if v is not None]
    positive = [v for v in values if v > 0]
    out = {
        "n": len(values),
        "min": min(positive) if positive else None,
        "max": max(values) if values else None,
        "avg": sum(values) / len(values) if values else None,
        "above": None,
    }
    if threshold is not None and values:
        out["above"] = sum(1 for v in values if v > threshold) / len(values)
    return out


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100) of the non-None values."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    pos = (len(values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def _spread(prefix: str, values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {}
    return {
        prefix: sum(values) / len(values),
        f"{prefix}_p10": percentile(values, 10),
        f"{prefix}_p90": percentile(values, 90),
    }


def stream_stats(obs: list[dict]) -> dict:
    """Aggregates over video stream observations (any mix of windows)."""
    send = [o for o in obs if o["kind"] == "video" and o["direction"] == "send"]
    recv = [o for o in obs if o["kind"] == "video" and o["direction"] == "recv"]
    out: dict = {}
    out.update(_spread("send_bps", [o["bps"] for o in send]))
    out.update(_spread("recv_bps", [o["bps"] for o in recv]))
    per_user: dict[tuple, float] = defaultdict(float)
    for o in recv:
        if o["bps"] is not None:
            per_user[(o["phase"], o["window"], o["user"])] += o["bps"]
    out.update(_spread("recv_total_bps", list(per_user.values())))
    out.update(_spread("rtt_send_ms", [r for o in send for r in o["rtt"]]))
    out.update(_spread("rtt_recv_ms", [r for o in recv for r in o["rtt"]]))
    out.update(_spread("fps", [o["fps"] for o in recv]))
    out.update(_spread("jitter_ms", [o["jitter_ms"] for o in recv]))
    lost = sum(o["lost"] for o in recv if o["expected"])
    expected = sum(o["expected"] for o in recv if o["expected"])
    if expected:
        out["loss_pct"] = 100.0 * lost / expected
    freezes = [(o["freezes"], o["dt"]) for o in recv if o["freezes"] is not None and o["dt"]]
    minutes = sum(dt for _, dt in freezes) / 60.0
    if minutes:
        out["freezes_per_min"] = sum(f for f, _ in freezes) / minutes
    out["streams"] = len(send) + len(recv)
    failed = sum(1 for o in send + recv if o.get("missing") or o["bps"] == 0)
    if send or recv:
        out["streams_failed"] = failed
        out["stream_failure_rate"] = failed / (len(send) + len(recv))
    return out


def stream_series(obs: list[dict]) -> list[dict]:
    """Per participant count, the aggregates of `stream_stats` over the ramp-up and target observations
    (background ones are folded into `Totals` instead)."""
    groups: dict[int, list[dict]] = defaultdict(list)
    for o in obs:
        if o["phase"] in MEASURED and o["participants"] is not None:
            groups[o["participants"]].append(o)
    return [{"participants": p, **stream_stats(groups[p])} for p in sorted(groups)]


class Totals:
    """Running sums over video stream observations: enough for means and pooled rates (no percentiles),
    so millions of background observations can be folded in and dropped."""
    MEANS = ("send_bps", "recv_bps", "rtt_send_ms", "rtt_recv_ms", "fps", "jitter_ms")

    def __init__(self):
        self.sum = dict.fromkeys(self.MEANS, 0.0)
        self.n = dict.fromkeys(self.MEANS, 0)
        self.lost = self.expected = self.freezes = self.freeze_s = 0.0
        self.t = None
        self.participants = None

    def _put(self, key: str, value, count: int = 1) -> None:
        self.sum[key] += value
        self.n[key] += count

    def add(self, o: dict) -> None:
        if o["kind"] != "video":
            return
        send = o["direction"] == "send"
        if o["t"] is not None and (self.t is None or o["t"] > self.t):
            self.t = o["t"]
        if o["participants"] is not None and (self.participants is None or o["participants"] > self.participants):
            self.participants = o["participants"]
        if o["bps"] is not None:
            self._put("send_bps" if send else "recv_bps", o["bps"])
        if o["rtt"]:
            self._put("rtt_send_ms" if send else "rtt_recv_ms", sum(o["rtt"]), len(o["rtt"]))
        if send:
            return
        if o["fps"] is not None:
            self._put("fps", o["fps"])
        if o["jitter_ms"] is not None:
            self._put("jitter_ms", o["jitter_ms"])
        if o["expected"]:
            self.lost += o["lost"]
            self.expected += o["expected"]
        if o["freezes"] is not None and o["dt"]:
            self.freezes += o["freezes"]
            self.freeze_s += o["dt"]

    def merge(self, other: "Totals") -> "Totals":
        for k in self.MEANS:
            self._put(k, other.sum[k], other.n[k])
        self.lost += other.lost
        self.expected += other.expected
        self.freezes += other.freezes
        self.freeze_s += other.freeze_s
        self.t = max((x for x in (self.t, other.t) if x is not None), default=None)
        self.participants = max((x for x in (self.participants, other.participants) if x is not None), default=None)
        return self

    def row(self) -> dict:
        out = {k: self.sum[k] / self.n[k] for k in self.MEANS if self.n[k]}
        if self.expected:
            out["loss_pct"] = 100.0 * self.lost / self.expected
        if self.freeze_s:
            out["freezes_per_min"] = self.freezes / (self.freeze_s / 60.0)
        return out


def window_totals(obs: Iterable[dict]) -> dict[tuple, Totals]:
    """(phase, window) -> Totals of its video observations."""
    totals: dict[tuple, Totals] = defaultdict(Totals)
    for o in obs:
        totals[(o["phase"], o["window"])].add(o)
    return totals


def window_series(totals: dict[tuple, Totals]) -> list[dict]:
    """One row per window in time order (t = its last sample): the run as it unfolded."""
    rows = [{"t": w.t, "phase": phase, "window": window, "participants": w.participants, **w.row()}
            for (phase, window), w in totals.items() if w.t is not None]
    return sorted(rows, key=_time)


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


def quality_stats(recs: list[dict]) -> dict:
    """Aggregates over quality.jsonl records: mean scores and the share of frozen frames."""
    row: dict = {"scored": len(recs)}
    for key in ("brisque", "psnr", "ssim", "vmaf"):
        value = _mean(r.get(key) for r in recs)
        if value is not None:
            row[key] = value
    frozen = [bool(r["frozen"]) for r in recs if r.get("frozen") is not None]
    if frozen:
        row["frozen_share"] = sum(frozen) / len(frozen)
    return row


def quality_series(quality: list[dict]) -> list[dict]:
    groups: dict[int, list[dict]] = defaultdict(list)
    for q in quality:
        if q.get("participants") is not None:
            groups[q["participants"]].append(q)
    return [{"participants": p, **quality_stats(groups[p])} for p in sorted(groups)]


def playback_stats(rows: list[dict]) -> dict:
    """Over playback.jsonl records (every delivered frame's code, per video and window): frames per
    second actually delivered, source frames skipped per second, freezes (one code for 0.5 s or
    more) per stream-minute, and glass-to-glass delay (the median of the videos' medians, and the
    90th percentile of their 90th percentiles)."""
    rows = [r for r in rows if r.get("duration")]
    seconds = sum(r["duration"] for r in rows)
    if not seconds:
        return {}
    out = {"code_fps": _mean([r["effective_fps"] for r in rows]),
           "skipped_per_s": sum(r["skipped"] for r in rows) / seconds,
           "code_freezes_per_min": 60 * sum(r["freezes"] for r in rows) / seconds}
    delays = [r["delay_ms"] for r in rows if r.get("delay_ms") is not None]
    if delays:
        out["delay_ms"] = median(delays)
        out["delay_ms_p90"] = percentile([r.get("delay_ms_p90") or r["delay_ms"] for r in rows
                                          if r.get("delay_ms") is not None], 90)
    return out


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
    """Video-check pass rate by participant count. A room's checks count at the load its ramp step was
    measured at (the room's validation event); checks of a room that never got one, at the count when
    they ran."""
    tl, rooms = timeline(events), room_participants(events)
    groups: dict[int, list[bool]] = defaultdict(list)
    for c in checks:
        p = rooms.get(c.get("room"))
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
        rows.sort(key=_time)
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


def cost_series(run: runfiles.Run) -> list[dict]:
    """What the SFU spent on forwarding, per participant count: its CPU (from the probe rows at the
    edges of the ramp-up and target windows) over what every receiver, browser or synthetic, got in
    those windows (Δpackets of each received audio and video stream between its first and last
    sample). `sfu_us_per_packet`: CPU µs per forwarded packet; `sfu_mhz_per_stream`: the cores it
    used, in MHz of this machine's clock, per forwarded stream (one published track delivered to one
    receiver), `sfu_mhz_per_published` per published track; `fwd_streams`, `fwd_pps`, `pub_streams`:
    what it forwarded and was sent; `sfu_in_mbps`, `sfu_out_mbps`: its interface's traffic;
    `sfu_udp_drops`: datagrams its namespace dropped for full socket buffers, per second."""
    span: dict[tuple, list] = {}   # (window, stream) -> [first t, packets, bytes, last t, packets, bytes]
    participants: dict = {}
    published: dict = defaultdict(set)   # window -> sent streams
    for s in runfiles.iter_measured_samples(run):
        if s.get("phase") not in MEASURED or s.get("direction") not in ("send", "recv"):
            continue
        if s.get("direction") == "send":
            published[s.get("window")].add(stream_key(s))
        t, n, b = _n(s.get("t")), _n(s.get("packets")), _n(s.get("bytes"))
        if t is None or n is None:
            continue
        key = (s.get("window"), stream_key(s))
        participants[s.get("window")] = s.get("participants")
        cur = span.get(key)
        if cur is None:
            span[key] = [t, n, b, t, n, b]
        elif t >= cur[3]:
            cur[3:] = [t, n, b]
    # window -> forwarded streams, forwarded packets/s, received payload bit/s, sent payload bit/s
    fwd: dict = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for (window, key), (t0, n0, b0, t1, n1, b1) in span.items():
        if t1 <= t0:
            continue
        bps = (b1 - b0) * 8000.0 / (t1 - t0) if b0 is not None and b1 is not None and b1 >= b0 else 0.0
        if key[2] == "send":
            fwd[window][3] += bps
        elif n1 > n0:
            fwd[window][0] += 1
            fwd[window][1] += (n1 - n0) * 1000.0 / (t1 - t0)
            fwd[window][2] += bps
    edges: dict = defaultdict(dict)
    for r in run.server:
        if (r.get("role") or "sfu") == "sfu" and r.get("edge") in ("start", "end") and r.get("window") is not None:
            edges[r["window"]][r["edge"]] = r
    # p -> Σ dt, Σ cores·dt, Σ pps·dt, Σ streams·dt, Σ published·dt, and Δ of each interface counter
    acc: dict = defaultdict(lambda: defaultdict(float))
    for window, (streams, pps, recv_bps, sent_bps) in fwd.items():
        e = edges.get(window, {})
        start, end, p = e.get("start"), e.get("end"), participants.get(window)
        if not start or not end or p is None or _n(start.get("cpu_s")) is None or _n(end.get("cpu_s")) is None:
            continue
        dt = (end["t"] - start["t"]) / 1000.0
        if dt > 0:
            a = acc[p]
            a["dt"] += dt
            a["cpu_s"] += end["cpu_s"] - start["cpu_s"]
            a["pps"] += pps * dt
            a["streams"] += streams * dt
            a["published"] += len(published.get(window, ())) * dt
            a["recv_bps"] += recv_bps * dt
            a["sent_bps"] += sent_bps * dt
            for key in ("net_rx_bytes", "net_tx_bytes", "udp_rcvbuf_errors", "periods", "throttled_periods",
                        *TRAFFIC):
                if _n(start.get(key)) is not None and _n(end.get(key)) is not None:
                    a[key] += end[key] - start[key]
                    a[key + "_dt"] += dt
    mhz = _n((run.meta.get("machine") or {}).get("cpu_mhz"))
    out = []
    for p in sorted(acc):
        a = acc[p]
        dt = a["dt"]
        cores, pps, streams, pub = a["cpu_s"] / dt, a["pps"] / dt, a["streams"] / dt, a["published"] / dt
        row = {"participants": p, "fwd_streams": round(streams), "fwd_pps": pps, "sfu_cores_fwd": cores,
               "sfu_us_per_packet": 1e6 * cores / pps, "pub_streams": round(pub)}
        if mhz:
            row["sfu_mhz_per_stream"] = cores * mhz / streams
            if pub:
                row["sfu_mhz_per_published"] = cores * mhz / pub
        if a["net_rx_bytes_dt"]:
            row["sfu_in_mbps"] = 8e-6 * a["net_rx_bytes"] / a["net_rx_bytes_dt"]
            row["sfu_out_mbps"] = 8e-6 * a["net_tx_bytes"] / a["net_tx_bytes_dt"]
        if a["udp_rcvbuf_errors_dt"]:
            row["sfu_udp_drops"] = a["udp_rcvbuf_errors"] / a["udp_rcvbuf_errors_dt"]
        if a["periods"]:
            row["sfu_throttled"] = a["throttled_periods"] / a["periods"]
        row.update(_traffic(a, p))
        out.append(row)
    return out


TRAFFIC = ("udp_in_bytes", "udp_out_bytes", "tcp_in_bytes", "tcp_out_bytes")


def _traffic(a: dict, participants: int) -> dict:
    """The SFU's media (UDP) and signalling (TCP) rates from its namespace's counters, and its media
    against what the clients' getStats say they sent and received (payload only: the ratios carry
    the packets' headers, RTCP and ICE)."""
    dt = a["udp_in_bytes_dt"]
    if not dt:
        return {}
    rate = {key: 8.0 * a[key] / dt for key in TRAFFIC}
    row = {"sfu_media_in_mbps": rate["udp_in_bytes"] / 1e6, "sfu_media_out_mbps": rate["udp_out_bytes"] / 1e6,
           "sfu_signalling_kbps": (rate["tcp_in_bytes"] + rate["tcp_out_bytes"]) / 1e3}
    if participants:
        row["sfu_signalling_kbps_per_participant"] = row["sfu_signalling_kbps"] / participants
    sent, recv = a["sent_bps"] / a["dt"], a["recv_bps"] / a["dt"]
    if sent:
        row["sfu_media_in_ratio"] = rate["udp_in_bytes"] / sent
    if recv:
        row["sfu_media_out_ratio"] = rate["udp_out_bytes"] / recv
    return row


KINDS = ("browser", "synthetic")


def kind_table(obs: list[dict], playback: list[dict], checks: list[dict], events: list[dict]) -> Table:
    """The receivers' figures per participant count and kind of client (browser or synthetic), so
    that neither kind's numbers pass for the other's."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for o in obs:
        if o["phase"] in MEASURED and o["direction"] == "recv" and o["participants"] is not None:
            groups[(o["participants"], o["client"])].append(o)
    delays: dict[tuple, list[dict]] = defaultdict(list)
    for r in playback:
        if r.get("participants") is not None:
            delays[(r["participants"], r.get("client") or "browser", r.get("peer_client") or "browser")].append(r)
    rooms = room_participants(events)
    passed: dict[tuple, list[bool]] = defaultdict(list)
    for c in checks:
        p = rooms.get(c.get("room"))
        if p is not None:
            passed[(p, c.get("client") or "browser")].append(bool(c.get("ok")))
    rows = []
    for key in sorted(set(groups) | set(passed)):
        st, ok = stream_stats(groups.get(key, [])), passed.get(key, [])
        delay = [playback_stats(delays.get((*key, sender), [])).get("delay_ms") for sender in KINDS]
        rows.append([key[0], key[1], len(groups.get(key, [])), _round(_scaled(st.get("recv_bps"), 1e-6), 3),
                     _round(st.get("fps"), 1), _round(st.get("jitter_ms"), 1), _round(st.get("loss_pct"), 2),
                     _round(st.get("freezes_per_min"), 2), *(_round(d, 0) for d in delay),
                     _round(100 * sum(ok) / len(ok), 1) if ok else None])
    return Table("clients", "Receivers by kind: browsers and synthetic participants",
                 ["Participants", "Receiver", "Video streams", "Recv video per stream (Mbps)", "Recv fps",
                  "Jitter (ms)", "Loss (%)", "Freezes / stream-min", "Delay from browsers (ms)",
                  "Delay from synthetic (ms)", "Checks passed (%)"],
                 rows, note="Synthetic participants (synth/) publish a pre-encoded clip at a fixed bitrate "
                 "(no encoder, no congestion control) and do not decode: they count a frame when all its "
                 "packets arrived, recognise the clip's frames by their bytes (delay, checks) and tell a "
                 "browser's frames apart by a fingerprint of theirs (checks only). Delay from a synthetic "
                 "sender has no capture or encoding in it.")


def network_table(obs: list[dict], playback: list[dict], events: list[dict], base: str,
                  health: list[dict]) -> Table:
    """The same participants under each network profile the degrade shape stepped through (its
    `network` windows), beside the target window under the run's own network (`base`), each with
    whether its clients had headroom (`health`, window_health's)."""
    headroom = {h["window"]: "no: " + "; ".join(h["reasons"]) if h["client_bound"] else "yes" for h in health}
    windows: dict = {}
    for o in obs:
        if o["phase"] in ("network", "target") and o["kind"] == "video":
            windows.setdefault(o["window"], []).append(o)
    if not any(group[0]["phase"] == "network" for group in windows.values()):
        return Table("network", "Under each network profile", [], [])
    changes = sorted((e["t"], e.get("network")) for e in events if e.get("event") == "network_changed" and e.get("t"))
    rows = []
    for window, group in sorted(windows.items(), key=lambda kv: min(o["t"] or 0 for o in kv[1])):
        t = min(o["t"] or 0 for o in group)
        name = base
        for changed, net in changes:
            if changed <= t:
                name = net
        st = stream_stats(group)
        pb = playback_stats([r for r in playback if r.get("window") == window])
        rows.append([name, group[0]["phase"], group[0]["participants"], _round(_scaled(st.get("recv_bps"), 1e-6), 3),
                     _round(st.get("fps"), 1), _round(st.get("rtt_send_ms"), 1), _round(st.get("loss_pct"), 2),
                     _round(st.get("jitter_ms"), 1), _round(st.get("freezes_per_min"), 2), _round(pb.get("delay_ms"), 0),
                     headroom.get(window, "not judged")])
    return Table("network", "Under each network profile: the same participants",
                 ["Network", "Window", "Participants", "Recv video per stream (Mbps)", "Recv fps", "Sender RTT (ms)",
                  "Loss (%)", "Jitter (ms)", "Freezes / stream-min", "Delay (ms)", "Clients had headroom"], rows,
                 note="The degrade shape measures the same load under each profile after a settling time; "
                      "the target window is under the run's own network.")


def _scaled(v, k):
    return None if v is None else v * k


def cost_table(cost: list[dict]) -> Table:
    rows = [[r["participants"], r.get("pub_streams"), r["fwd_streams"], _round(r["fwd_pps"], 0),
             _round(r["sfu_cores_fwd"], 3), _round(r["sfu_us_per_packet"], 2), _round(r.get("sfu_mhz_per_published"), 1),
             _round(r.get("sfu_mhz_per_stream"), 2), _round(r.get("sfu_in_mbps"), 2), _round(r.get("sfu_out_mbps"), 2),
             _round(r.get("sfu_udp_drops"), 1), _round(_scaled(r.get("sfu_throttled"), 100), 1)] for r in cost]
    return Table("cost", "What the SFU spent per forwarded stream and packet, at each step",
                 ["Participants", "Published streams", "Forwarded streams", "Forwarded packets/s", "SFU CPU (cores)",
                  "SFU CPU per packet (µs)", "SFU MHz per published stream", "SFU MHz per forwarded stream",
                  "SFU in (Mbps)", "SFU out (Mbps)", "SFU socket drops / s", "SFU throttled (% of periods)"], rows,
                 note="Over the ramp-up and target windows at each count; a forwarded stream is one "
                      "published track (audio or video) delivered to one receiver, browser or synthetic. "
                      "Throttled: the share of CFS periods in which the SFU's CPU budget ran out.")


def traffic_table(cost: list[dict]) -> Table:
    """The SFU's media and signalling apart, and its media against what the clients sent and got."""
    rows = [[r["participants"], _round(r["sfu_media_in_mbps"], 2), _round(r["sfu_media_out_mbps"], 2),
             _round(r.get("sfu_media_in_ratio"), 2), _round(r.get("sfu_media_out_ratio"), 2),
             _round(r["sfu_signalling_kbps"], 1), _round(r.get("sfu_signalling_kbps_per_participant"), 2)]
            for r in cost if r.get("sfu_media_in_mbps") is not None]
    return Table("traffic", "The SFU's traffic: media and signalling apart",
                 ["Participants", "Media in (Mbps)", "Media out (Mbps)", "Media in / clients sent",
                  "Media out / clients received", "Signalling (kbit/s)", "Signalling per participant (kbit/s)"],
                 rows, note="Counted by protocol in the SFU's network namespace (nftables): media is UDP (RTP, "
                 "RTCP, ICE, DTLS), signalling TCP (WebSocket and HTTP, the engine's health checks too). The "
                 "ratios set the SFU's media, headers included, against the payload the clients' getStats "
                 "say they sent and received: above about 1.5 something sends far more than the media.")


# ---------------------------------------------------------------- tables

@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list]
    note: str = ""
    row_keys: list[str] = field(default_factory=list)   # a stable name per row, where rows are metrics

    def as_dict(self) -> dict:
        return {"title": self.title, "columns": self.columns, "rows": self.rows, "note": self.note}


STUDY_COLUMNS = ["Metric", "Unit", "n", "Min (of > 0)", "Max", "Avg", "Threshold", "Share above (%)"]


def _round(x, digits: int):
    return None if x is None else round(x, digits)


def _study_row(label: str, unit: str, values: list[float], scale: float, digits: int,
               threshold: float | None = None) -> list:
    d = describe([v * scale for v in values if v is not None],
                 threshold * scale if threshold is not None else None)
    thr = f"> {threshold * scale:g} {unit}" if threshold is not None else None
    return [label, unit, d["n"], _round(d["min"], digits), _round(d["max"], digits), _round(d["avg"], digits),
            thr, _round(d["above"] * 100, 1) if d["above"] is not None else None]


SENDER_KEYS = ["send_bps", "rtt_send_ms"]
RECEIVER_KEYS = ["recv_bps", "rtt_recv_ms", "fps", "jitter_ms", "loss_pct"]


def _sender_rows(obs: list[dict]) -> list[list]:
    send = [o for o in obs if o["kind"] == "video" and o["direction"] == "send"]
    return [
        _study_row("Video bitrate sent, per stream", "Mbps", [o["bps"] for o in send], 1e-6, 3,
                   BITRATE_THRESHOLD_BPS),
        _study_row("RTT, sender (remote-inbound-rtp)", "ms", [r for o in send for r in o["rtt"]], 1, 1,
                   RTT_THRESHOLD_MS),
    ]


def _receiver_rows(obs: list[dict]) -> list[list]:
    recv = [o for o in obs if o["kind"] == "video" and o["direction"] == "recv"]
    return [
        _study_row("Video bitrate received, per stream", "Mbps", [o["bps"] for o in recv], 1e-6, 3,
                   BITRATE_THRESHOLD_BPS),
        _study_row("RTT, receiver (candidate pair)", "ms", [r for o in recv for r in o["rtt"]], 1, 1,
                   RTT_THRESHOLD_MS),
        _study_row("Frame rate received", "fps", [o["fps"] for o in recv], 1, 1),
        _study_row("Jitter received", "ms", [o["jitter_ms"] for o in recv], 1, 1),
        _study_row("Packet loss received, per window", "%",
                   [o["lost"] / o["expected"] for o in recv if o["expected"]], 100, 2),
    ]


def study_tables(obs: list[dict]) -> list[Table]:
    """Tables IV–VI of the 2018 study: ramp-up sender, ramp-up receiver, target load.

    Bitrates are one value per stream and window; RTTs one per sample, as in the study."""
    ramp = [o for o in obs if o["phase"] == "ramp"]
    target = [o for o in obs if o["phase"] == "target"]
    return [
        Table("table4", "Table IV style — ramp-up, sender", STUDY_COLUMNS, _sender_rows(ramp),
              row_keys=SENDER_KEYS),
        Table("table5", "Table V style — ramp-up, receiver", STUDY_COLUMNS, _receiver_rows(ramp),
              row_keys=RECEIVER_KEYS),
        Table("table6", "Table VI style — target load, sender and receiver", STUDY_COLUMNS,
              _sender_rows(target) + _receiver_rows(target), row_keys=SENDER_KEYS + RECEIVER_KEYS),
    ]


def rooms_table(rooms: list[dict]) -> Table:
    rows = [[r["room"], r["checks"], r["passed"],
             _round(r["pass_rate"] * 100, 1) if r["pass_rate"] is not None else None,
             ", ".join(f"{v} {k}" for k, v in sorted(r["verdicts"].items(), key=lambda kv: -kv[1]))]
            for r in rooms]
    return Table("checks", "Video checks per room", ["Room", "Checks", "Passed", "Pass rate (%)", "Verdicts"],
                 rows)


def health_table(health: list[dict]) -> Table:
    def pct(v):
        return None if v is None else round(100 * v, 1)
    rows = [[h["phase"], h["window"], h["participants"], _round(h.get("duration_s"), 1),
             pct(h.get("sfu_throttled")), pct(h.get("clients_throttled")), "yes" if h["client_bound"] else "no",
             "; ".join(h["reasons"])] for h in health]
    return Table("health", "Each measured window: the SFU's budget and the load generator",
                 ["Phase", "Window", "Participants", "Length (s)", "SFU throttled (% of periods)",
                  "Clients throttled (% of periods)", "Client-bound", "Why"], rows,
                 note="Throttled: the share of the window's CFS periods in which the group's CPU quota ran "
                      "out, so that it waited for the next period (empty without a quota).")


SERIES_COLUMNS = [
    ("participants", "Participants", 1, 0),
    ("send_bps", "Send video (Mbps)", 1e-6, 3),
    ("recv_bps", "Recv video per stream (Mbps)", 1e-6, 3),
    ("recv_total_bps", "Recv video per participant (Mbps)", 1e-6, 3),
    ("rtt_send_ms", "Sender RTT (ms)", 1, 1),
    ("rtt_recv_ms", "Receiver RTT (ms)", 1, 1),
    ("fps", "Recv fps", 1, 1),
    ("loss_pct", "Recv loss (%)", 1, 2),
    ("jitter_ms", "Recv jitter (ms)", 1, 1),
    ("freezes_per_min", "Freezes / stream-min", 1, 2),
    ("brisque", "BRISQUE", 1, 1),
    ("vmaf", "VMAF", 1, 1),
    ("psnr", "PSNR (dB)", 1, 1),
    ("delay_ms", "Delay median (ms)", 1, 0),
    ("check_pass_rate", "Checks passed (%)", 100, 1),
    ("sfu_cpu", "SFU CPU (cores)", 1, 3),
    ("sfu_rss", "SFU RSS (MB)", 1e-6, 0),
    ("clients_cpu_per_participant", "Browser CPU / participant (cores)", 1, 3),
    ("fwd_pps", "Forwarded packets/s", 1, 0),
    ("sfu_us_per_packet", "SFU CPU per packet (µs)", 1, 2),
    ("sfu_mhz_per_stream", "SFU MHz per forwarded stream", 1, 2),
]


def series_table(series: list[dict]) -> Table:
    cols = [c for c in SERIES_COLUMNS if any(r.get(c[0]) is not None for r in series)]
    rows = [[_round(r[k] * scale, d) if r.get(k) is not None else None for k, _, scale, d in cols]
            for r in series]
    return Table("series", "Measurements by participant count (ramp-up and target)", [c[1] for c in cols], rows)


# ---------------------------------------------------------------- a whole run

@dataclass
class Analysis:
    run: runfiles.Run
    ident: dict
    obs: list[dict]             # ramp and target stream observations (background ones are in `windows`)
    timeline: list[tuple[float, int]]
    series: list[dict]          # ramp + target, by participant count
    background: list[dict]      # background windows, by participant count
    windows: list[dict]         # every window in time order
    server: list[dict]
    rooms: list[dict]
    tables: list[Table]
    knee: Knee
    rule: KneeRule
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
    bound = [h for h in a.health if h["phase"] == "target" and h["client_bound"]]
    started = [p for _, p in a.timeline]
    target_participants = max((o["participants"] for o in target if o["participants"]), default=None)
    checks = [bool(c.get("ok")) for c in run.checks]
    # CPU at target: the engine's figure in meta.json (from the probe at the target window's edges), else
    # the probe rows at the target participant count
    cpu, at_target = a.ident["cpu"], next((r for r in a.server if r["participants"] == target_participants), {})
    return {
        "participants": max(started, default=0) or max((w["participants"] or 0 for w in a.windows), default=None),
        "target_participants": target_participants,
        "status": run_status(run.events),
        "knee": a.knee.participants,
        "knee_criterion": a.knee.criterion,
        "send_bps": at.get("send_bps"),
        "recv_bps": at.get("recv_bps"),
        "recv_total_bps": at.get("recv_total_bps"),
        "rtt_send_ms": at.get("rtt_send_ms"),
        "rtt_recv_ms": at.get("rtt_recv_ms"),
        "fps": at.get("fps"),
        "loss_pct": at.get("loss_pct"),
        "jitter_ms": at.get("jitter_ms"),
        "freezes_per_min": at.get("freezes_per_min"),
        "brisque": tq.get("brisque"),
        "vmaf": tq.get("vmaf"),
        "psnr": tq.get("psnr"),
        "delay_ms": tp.get("delay_ms"),
        "code_fps": tp.get("code_fps"),
        "stream_failure_rate": at.get("stream_failure_rate"),
        "target_client_bound": bool(bound) if any(h["phase"] == "target" for h in a.health) else None,
        "client_reasons": "; ".join(bound[0]["reasons"]) if bound else None,
        "check_pass_rate": sum(checks) / len(checks) if checks else None,
        "checks": len(checks),
        "server_cpu_per_participant": cpu.get("sfu_per_participant", at_target.get("sfu_cpu_per_participant")),
        "client_cpu_per_participant": cpu.get("clients_per_participant",
                                              at_target.get("clients_cpu_per_participant")),
    }


def analyse(run: runfiles.Run, rule: KneeRule = KneeRule(), client_rule: ClientRule = ClientRule()) -> Analysis:
    obs, totals = [], defaultdict(Totals)
    for o in iter_stream_windows(runfiles.iter_video_samples(run)):
        totals[(o["phase"], o["window"])].add(o)
        if o["phase"] != "background":
            obs.append(o)
    obs += missing_streams(obs, run.events, run.windows)
    tl = timeline(run.events)
    health = window_health(run, obs, client_rule)
    cost = cost_series(run)
    series = merge_series(stream_series(obs), freeze_series(totals), quality_series(run.quality),
                          playback_series(run.playback), check_series(run.checks, run.events),
                          health_series(health), cost)
    a = Analysis(
        run=run,
        ident=runfiles.identity(run.meta, run.path),
        obs=obs,
        timeline=tl,
        series=series,
        background=background_series(totals),
        windows=window_series(totals),
        server=server_series(run.server, tl),
        rooms=room_checks(run.checks),
        tables=study_tables(obs),
        knee=find_knee(series, rule),
        rule=rule,
        health=health,
        client_rule=client_rule,
        cost=cost,
    )
    a.headline = headline(a)
    return a


# ---------------------------------------------------------------- end-of-run summary

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
