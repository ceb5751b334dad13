"""Statistics over windows and records: the study's min/max/average/share cells, percentiles, and the
stream, quality and playback figures of a set of them."""
from __future__ import annotations

import math
from collections import defaultdict
from statistics import median

from .catalog import PERCENTILES
from .windows import mean


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


def spread(prefix: str, values: list[float]) -> dict:
    """The mean of `values`, the p10-p90 band the plots draw, and the catalogue's percentiles."""
    values = [v for v in values if v is not None]
    if not values:
        return {}
    return {
        prefix: sum(values) / len(values),
        f"{prefix}_p10": percentile(values, 10),
        **{f"{prefix}_{p}": max(values) if p == "max" else percentile(values, float(p[1:]))
           for p in PERCENTILES},
    }


def stream_stats(obs: list[dict]) -> dict:
    """Aggregates over video stream observations (any mix of windows)."""
    send = [o for o in obs if o["kind"] == "video" and o["direction"] == "send"]
    recv = [o for o in obs if o["kind"] == "video" and o["direction"] == "recv"]
    out: dict = {}
    out.update(spread("send_bps", [o["bps"] for o in send]))
    out.update(spread("recv_bps", [o["bps"] for o in recv]))
    per_user: dict[tuple, float] = defaultdict(float)
    for o in recv:
        if o["bps"] is not None:
            per_user[(o["phase"], o["window"], o["user"])] += o["bps"]
    out.update(spread("recv_total_bps", list(per_user.values())))
    out.update(spread("rtt_send_ms", [r for o in send for r in o["rtt"]]))
    out.update(spread("rtt_recv_ms", [r for o in recv for r in o["rtt"]]))
    out.update(spread("fps", [o["fps"] for o in recv]))
    out.update(spread("jitter_ms", [o["jitter_ms"] for o in recv]))
    lost = sum(o["lost"] for o in recv if o["expected"])
    expected = sum(o["expected"] for o in recv if o["expected"])
    if expected:
        out["loss_pct"] = 100.0 * lost / expected
    out.update(spread("nacks_per_s", [o["nacks"] / o["dt"] for o in recv
                                       if o.get("nacks") is not None and o["dt"]]))
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


def quality_stats(recs: list[dict]) -> dict:
    """Aggregates over quality.jsonl records: mean scores and the share of frozen frames."""
    row: dict = {"scored": len(recs)}
    for key in ("brisque", "psnr", "ssim", "vmaf"):
        value = mean(r.get(key) for r in recs)
        if value is not None:
            row[key] = value
    frozen = [bool(r["frozen"]) for r in recs if r.get("frozen") is not None]
    if frozen:
        row["frozen_share"] = sum(frozen) / len(frozen)
    return row


def playback_stats(rows: list[dict]) -> dict:
    """Over playback.jsonl records (every delivered frame's code, per video and window): frames per
    second actually delivered, source frames skipped per second, freezes (one code for 0.5 s or
    more) per stream-minute, and glass-to-glass delay (the median of the videos' medians, and the
    90th percentile of their 90th percentiles)."""
    rows = [r for r in rows if r.get("duration")]
    seconds = sum(r["duration"] for r in rows)
    if not seconds:
        return {}
    out = {"code_fps": mean([r["effective_fps"] for r in rows]),
           "skipped_per_s": sum(r["skipped"] for r in rows) / seconds,
           "code_freezes_per_min": 60 * sum(r["freezes"] for r in rows) / seconds}
    delays = [r["delay_ms"] for r in rows if r.get("delay_ms") is not None]
    if delays:
        out["delay_ms"] = median(delays)
        out["delay_ms_p90"] = percentile([r.get("delay_ms_p90") or r["delay_ms"] for r in rows
                                          if r.get("delay_ms") is not None], 90)
    return out
