"""The kernel's share of a datagram on this machine, the floor under the generator's cost: the CPU
time of one of its batched, timestamped socket reads and of one send, on loopback with the other end
on another CPU as the lab's SFU is (the datagrams read written there; a send delivers into the other
socket, the sender paying the receiving side's IP and UDP work, as on the lab's veth links), from
synth's Go benchmarks (socket_test.go), each the median of 5 runs. Also timed: a send that wakes the
SFU's reader asleep in its read, as most of the generator's do (audio packets, a frame's first):
not part of the floor, which a busy SFU's reader gives.
With the packet rates of a run, the most streams per core a generator could receive if its own
code cost nothing.

    .venv/bin/python bench/kernelfloor.py [--pps-per-stream 62] [--users-per-room 7]
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

SYNTH = Path(__file__).resolve().parents[1] / "synth"
DATAGRAMS = 20000
REPEATS = 5   # a VM's figures move by a third between runs: the median of these
METRIC = re.compile(r"^BenchmarkKernelFloor(Receive|Send|WakingSend)\S*\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) cpu-µs/datagram", re.M)
KINDS = {"receive": "receive_us", "send": "send_us", "wakingsend": "waking_send_us"}


def measure() -> dict[str, float]:
    """`receive_us`, `send_us` and `waking_send_us`: CPU µs per datagram."""
    r = subprocess.run(["go", "test", "-run", "^$", "-bench", "KernelFloor", "-benchtime", f"{DATAGRAMS}x",
                        "-count", str(REPEATS), "."], cwd=SYNTH, capture_output=True, text=True, timeout=600)
    found: dict[str, list[float]] = {}
    for kind, us in METRIC.findall(r.stdout):
        found.setdefault(kind.lower(), []).append(float(us))
    if r.returncode or set(found) != set(KINDS):
        raise RuntimeError(f"synth's KernelFloor benchmarks: {(r.stderr or r.stdout).strip()[-500:]}")
    return {**{key: statistics.median(found[kind]) for kind, key in KINDS.items()}, "repeats": REPEATS}


def ceiling(floor: dict[str, float], pps_per_stream: float, users_per_room: int) -> float:
    """Received streams per core at the kernel's cost alone: each received packet read, and the
    generator's own packets sent, one for every users_per_room - 1 it receives (everyone receives
    everyone else's streams, at the same rates)."""
    us = floor["receive_us"] + floor["send_us"] / (users_per_room - 1)
    return 1e6 / (us * pps_per_stream)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pps-per-stream", type=float, default=62.0, help="packets per second of a received stream")
    p.add_argument("--users-per-room", type=int, default=7)
    a = p.parse_args(argv)
    if a.pps_per_stream <= 0 or a.users_per_room < 2:
        print("kernelfloor: --pps-per-stream > 0 and --users-per-room >= 2", file=sys.stderr)
        return 2
    try:
        floor = measure()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"kernelfloor: {e}", file=sys.stderr)
        return 1
    print(f"a batched read {floor['receive_us']:.2f} µs and a send {floor['send_us']:.2f} µs of CPU per datagram: "
          f"at most {ceiling(floor, a.pps_per_stream, a.users_per_room):,.0f} received streams per core; "
          f"a send that wakes the SFU's reader {floor['waking_send_us']:.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
