"""What the load generator costs: cores per real Chromium participant, and what measuring adds.

    .venv/bin/python bench/clients.py [--sfu janus] [--seconds 10] [--pairs 3]

One room against a real SFU in the lab, at the local profile (7 participants, 320x180@15) and at the
paper profile (3 participants, 540x360@30: 7 would need more than this machine's 2 cores). Once the
room is validated, the clients' cgroup CPU is read over four spans of the same length: idle (no
frame codes read, no getStats), following (every frame's code read, as during checks and windows),
measuring (frame codes and a getStats round every second: a measurement window, recording no audio)
and recording (the same window, every browser recording what it hears and its microphone for the
span, as --audio-seconds asks), the last two alternated --pairs times: what recording costs is the
median of the pairs' differences, printed with their range (one span's CPU moves by a few
hundredths of a core). The recordings are not scored: scoring runs on the engine after a run, not
on the clients. Received audio is played out muted throughout (its jitter buffer's figures need
it), so it is in every span. Not a test:
the figures depend on the machine, printed beside them. Exit codes: 0 ok, 1 a run failed, 2 bad
input, 130 interrupted.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# runnable as a plain script from a checkout, without installing the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sfubench import config, loadtest  # noqa: E402
from sfubench.progress import Progress  # noqa: E402
from sfubench.rundir import read  # noqa: E402

PROFILES = (("local", 7), ("paper", 3))   # media profile, participants in the room


def spans(seconds: float, pairs: int, found: dict):
    """A scenario: one room, validated, then idle / following spans of `seconds`, then `pairs` of
    measuring / recording ones; `found` gets each phase's windows."""
    def scenario(runner) -> None:
        want = runner.shape.tick(runner.status).participants
        runner.status.rooms = 1
        while runner.status.participants < want:
            runner.start_participant(1)
        runner.validate(1)
        for phase, follow in (("idle", False), ("following", True)):
            runner.follow(follow)
            time.sleep(2)   # pages pick commands up twice a second; let the change settle
            runner.window += 1
            found[phase] = [runner.window]
            runner.read_probes(phase, runner.window, "start")
            time.sleep(seconds)
            runner.read_probes(phase, runner.window, "end")
        asked = runner.cfg
        for _ in range(pairs):
            for phase, record in (("measuring", 0.0), ("recording", seconds)):
                runner.cfg = dataclasses.replace(asked, audio_seconds=record, audio_windows="all")
                runner.measure("target", int(seconds) + 1)
                found.setdefault(phase, []).append(runner.window)
        runner.cfg = asked
    return scenario


def cores(run_dir: Path, window: int, role: str = "clients") -> float | None:
    edge = {r["edge"]: r for r in read(run_dir, "server") if r.get("window") == window and r["role"] == role}
    if "start" not in edge or "end" not in edge:
        return None
    return (edge["end"]["cpu_s"] - edge["start"]["cpu_s"]) / ((edge["end"]["t"] - edge["start"]["t"]) / 1000)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sfu", default="janus")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each span")
    ap.add_argument("--pairs", type=int, default=3, help="measuring / recording pairs of spans")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.pairs < 1:
        print("bench/clients.py: --seconds must be positive and --pairs at least 1", file=sys.stderr)
        return 2
    loadtest.score_speech = lambda *a, **k: 0   # the engine's work after the run, not the clients'
    if os.geteuid() != 0:
        print("bench/clients.py: the lab needs root", file=sys.stderr)
        return 2
    out = Path(tempfile.mkdtemp(prefix="sfubench-bench-clients-"))
    rows = []
    for profile, users in PROFILES:
        cfg = config.load(cli={"sfu": args.sfu, "preset": "browsers", "media": profile, "users_per_room": users, "out": str(out),
                               "quality_frames": 0, "background_interval": 0, "lab_prefix": "sfubc",
                               "lab_subnet": "127.0.5", "results_db": str(out / "results.sqlite")}, env={})
        found: dict[str, list[int]] = {}
        try:
            run_dir, status = loadtest.run(cfg, Progress(open(os.devnull, "w")), spans(args.seconds, args.pairs, found))
        except KeyboardInterrupt:
            return 130
        if status != "ok" or len(found.get("recording", [])) != args.pairs:
            print(f"bench/clients.py: the {profile} run did not complete ({status}); see {out}", file=sys.stderr)
            return 1
        c = {phase: [cores(run_dir, w) for w in windows] for phase, windows in found.items()}
        recording = sorted((r - m) / users for m, r in zip(c["measuring"], c["recording"]))
        c = {phase: statistics.median(values) for phase, values in c.items()}
        rows.append((profile, users, c, recording, cores(run_dir, found["measuring"][0], "sfu")))
    print(f"client cost, {args.sfu}, one room, clients' cgroup CPU over {args.seconds:g}-s spans "
          f"({os.cpu_count()} cores):")
    for profile, users, c, recording, sfu in rows:
        print(f"  {profile:6} {users} participants: {c['measuring'] / users:.3f} cores per participant "
              f"measuring ({c['measuring']:.2f} in all; SFU {sfu:.2f})")
        print(f"         measurement overhead: following frame codes +{c['following'] - c['idle']:.2f} cores, "
              f"getStats every second +{c['measuring'] - c['following']:.2f} cores over idle "
              f"{c['idle']:.2f}; recording what each hears {statistics.median(recording):+.3f} cores per "
              f"participant (median of {len(recording)} pairs; {recording[0]:+.3f} to {recording[-1]:+.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
