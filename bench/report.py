"""Time report generation on a run of ~500 participants (72 rooms of 7).

    python bench/report.py [--rooms 72] [--keep DIR]

Generates a fake run (ramp, target and background samples, checks, quality, server probe), then
times the end-of-run summary and the run report. Exits 1 when the report takes longer than the target:
1.5 times the 10 s it was held to before it read what participants heard (every received audio
stream's playout, in every measured window), as the audio work asked.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# runnable as a plain script from a checkout, without installing the package; the fake run folders
# are the test suite's
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from reports import metrics, run  # noqa: E402
from support import fakerun  # noqa: E402

TARGET_S = 15.0


def timed(fn, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rooms", type=int, default=72)
    ap.add_argument("--background", type=float, default=30.0, help="background tick interval, s")
    ap.add_argument("--keep", type=Path, help="write the run here and keep it (default: a temporary folder)")
    args = ap.parse_args(argv)

    parent = args.keep or Path(tempfile.mkdtemp(prefix="sfubench-bench-"))
    run_dir, wall, _ = timed(fakerun.make_run, parent, rooms=args.rooms, knee=args.rooms * 7 * 3 // 4,
                             background_interval_s=args.background)
    size = sum(f.stat().st_size for f in run_dir.iterdir() if f.suffix == ".jsonl")
    with open(run_dir / "samples.jsonl") as f:
        samples = sum(1 for _ in f)
    print(f"run: {run_dir} — {args.rooms * 7} participants, {samples:,} samples, {size / 1e6:.0f} MB of records "
          f"(generated in {wall:.1f} s)")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")

    summary, wall, cpu = timed(metrics.summary, run_dir)
    print(f"summary(run_dir):  {wall:5.2f} s wall, {cpu:5.2f} s CPU")
    report, wall, cpu = timed(run.build, run_dir)
    ok = wall < TARGET_S
    print(f"run.build(run_dir): {wall:5.2f} s wall, {cpu:5.2f} s CPU — target < {TARGET_S:g} s: "
          f"{'met' if ok else 'MISSED'}")
    print(f"report: {report}")
    if not args.keep:
        shutil.rmtree(parent)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
