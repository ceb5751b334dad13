"""A soak: the study's scenario (rooms of 7, the first room's participants real Chromium where the
clients carry them, the SFU on its budget) held at a steady load for an hour, to show that the engine
stays flat while a long run goes on.

    .venv/bin/python bench/soak.py [--sfu janus] [--rooms 3] [--minutes 60] [--json FILE]

Reported over the time the load is held: the engine's resident memory and CPU (the page server and
its collector run inside the engine, so theirs are counted with it), the run folder's growth in MB
per participant-hour, and the drift of the SFU's CPU and of the bitrate the SFU sends between the
first and the last quarter. The engine's memory is judged after a warm-up (the first tenth of the
hold, at least a minute): its growth from then to the end must stay under 5 %.
Exit codes: 0 flat, 1 the run failed or the engine grew, 2 bad input, 130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sfubench.rundir import read  # noqa: E402

GROWTH_LIMIT = 0.05


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def held_since(events: list[dict], rooms: int) -> float:
    """When the last room was validated: the hold starts there (ms)."""
    validated = [e["t"] for e in events if e.get("event") == "room_validated"]
    if len(validated) < rooms:
        raise RuntimeError(f"only {len(validated)} of {rooms} rooms were validated")
    return validated[rooms - 1]


def quarter_medians(rows: list[dict], field: str) -> tuple[float, float]:
    """Medians of `field` over the first and the last quarter of `rows` (in time order)."""
    values = [r[field] for r in rows if r.get(field) is not None]
    q = max(1, len(values) // 4)
    return statistics.median(values[:q]), statistics.median(values[-q:])


def analyse(run: Path, rooms: int, growth: list[tuple[float, float]]) -> dict:
    server = read(run, "server")
    start = held_since(read(run, "events"), rooms)
    engine = [r for r in server if r["role"] == "engine" and r["t"] >= start]
    sfu = [r for r in server if r["role"] == "sfu" and r["t"] >= start]
    if len(engine) < 8:
        raise RuntimeError(f"too few engine samples over the hold ({len(engine)})")
    held_s = (engine[-1]["t"] - engine[0]["t"]) / 1000
    warm = engine[0]["t"] + max(60_000, held_s * 100)           # a tenth of the hold, at least a minute
    settled = [r["rss"] for r in engine if r["t"] >= warm]
    base = statistics.median(settled[:max(1, len(settled) // 10)])
    end = statistics.median(settled[-max(1, len(settled) // 10):])
    participants = engine[-1].get("participants") or rooms * 7
    cpu = [r["cpu"] for r in engine if r.get("cpu") is not None]
    first_cpu, last_cpu = quarter_medians(sfu, "cpu")
    first_tx, last_tx = quarter_medians(_rates(sfu, "net_tx_bytes"), "rate")
    size = folder_mb(run)
    return {
        "run": str(run), "participants": participants, "held_minutes": round(held_s / 60, 1),
        "engine": {"rss_mb_after_warmup": round(base / 1e6, 1), "rss_mb_at_end": round(end / 1e6, 1),
                   "rss_mb_peak": round(max(r["rss"] for r in engine) / 1e6, 1),
                   "growth": round(end / base - 1, 4), "cpu_mean": round(statistics.fmean(cpu), 4),
                   "cpu_p95": round(sorted(cpu)[int(0.95 * (len(cpu) - 1))], 4)},
        "folder": {"mb": round(size, 1),
                   "mb_per_participant_hour": round(size / (participants * held_s / 3600), 2),
                   "growth_mb": [(round(t, 1), round(mb, 1)) for t, mb in growth]},
        "sfu": {"cpu_first_quarter": first_cpu, "cpu_last_quarter": last_cpu,
                "cpu_drift": round(last_cpu / first_cpu - 1, 4) if first_cpu else None,
                "tx_mbps_first_quarter": round(first_tx * 8 / 1e6, 2),
                "tx_mbps_last_quarter": round(last_tx * 8 / 1e6, 2)},
        "series": [{"minute": round((r["t"] - engine[0]["t"]) / 60_000, 2), "rss_mb": round(r["rss"] / 1e6, 1),
                    "cpu": r.get("cpu")} for r in engine[::6]],
    }


def _rates(rows: list[dict], counter: str) -> list[dict]:
    """Bytes per second of a cumulative counter between consecutive rows."""
    out = []
    for a, b in zip(rows, rows[1:]):
        if counter in a and counter in b and b["t"] > a["t"]:
            out.append({"rate": (b[counter] - a[counter]) / ((b["t"] - a["t"]) / 1000)})
    return out


def soak(a) -> tuple[Path, list[tuple[float, float]], int]:
    """Runs the hold, sampling the run folder's size every minute (minute, MB)."""
    cmd = [sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", a.sfu, "--shape", "steady",
           "--rooms", str(a.rooms), "--steady-minutes", f"{a.minutes:g}", "--out", str(a.out),
           "--lab-prefix", a.lab_prefix, "--lab-subnet", a.lab_subnet]
    print(" ".join(cmd[2:]), flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT)
    started, growth = time.monotonic(), []
    try:
        while proc.poll() is None:
            time.sleep(5)
            runs = [p for p in a.out.iterdir() if p.is_dir() and p.name[0].isdigit()]
            minute = (time.monotonic() - started) / 60
            if runs and (not growth or minute - growth[-1][0] >= 1):
                growth.append((minute, folder_mb(runs[0])))
    except KeyboardInterrupt:
        proc.wait()
        raise
    (run,) = [p for p in a.out.iterdir() if p.is_dir() and p.name[0].isdigit()]
    return run, growth, proc.returncode


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sfu", default="janus")
    p.add_argument("--rooms", type=int, default=3, help="rooms of 7 held (default 3: 21 participants)")
    p.add_argument("--minutes", type=float, default=60.0, help="how long the load is held")
    p.add_argument("--out", type=Path, help="where the run goes (default: a new temporary folder)")
    p.add_argument("--lab-prefix", default="sfubsk", help="lab names, so tests can run beside")
    p.add_argument("--lab-subnet", default="127.0.30")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.rooms < 1 or not 1 <= a.minutes <= 24 * 60:
        print("soak: --rooms must be at least 1 and --minutes within 1-1440", file=sys.stderr)
        return 2
    a.out = a.out or Path(tempfile.mkdtemp(prefix="sfubench-soak-"))
    a.out.mkdir(parents=True, exist_ok=True)
    try:
        run, growth, rc = soak(a)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if rc != 0:
        print(f"soak: the run exited {rc}; see {a.out}", file=sys.stderr)
        return 1
    try:
        figures = analyse(run, a.rooms, growth)
    except (RuntimeError, OSError) as e:
        print(f"soak: {e}", file=sys.stderr)
        return 1
    e, f, s = figures["engine"], figures["folder"], figures["sfu"]
    print(f"\nSoak of {a.sfu}, {figures['participants']} participants held {figures['held_minutes']} min "
          f"({os.cpu_count()} cores):")
    print(f"  engine RSS {e['rss_mb_after_warmup']} MB after the warm-up, {e['rss_mb_at_end']} MB at the end "
          f"({e['growth']:+.1%}; limit {GROWTH_LIMIT:.0%}), peak {e['rss_mb_peak']} MB; "
          f"engine CPU {e['cpu_mean']:.3f} core mean, {e['cpu_p95']:.3f} p95")
    print(f"  run folder {f['mb']} MB: {f['mb_per_participant_hour']} MB per participant-hour")
    print(f"  SFU CPU {s['cpu_first_quarter']:.3f} -> {s['cpu_last_quarter']:.3f} cores (first -> last quarter), "
          f"sent {s['tx_mbps_first_quarter']} -> {s['tx_mbps_last_quarter']} Mbps")
    if a.json:
        a.json.write_text(json.dumps(figures, indent=1))
    if e["growth"] >= GROWTH_LIMIT:
        print(f"soak: the engine's memory grew {e['growth']:.1%} over the hold", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
