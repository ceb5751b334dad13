"""Where a Go process's CPU went, from its pprof CPU profile: each sample is given to the part of the
work its stack shows nearest the leaf (a system call made to send RTCP is a system call; AES run by
the SRTP context is SRTP), and the shares are printed per process.

    .venv/bin/python bench/cpushare.py cpu.pprof [more.pprof ...]

Go's profiler samples thread CPU time, kernel time in system calls included, so "system calls" is
what the process spent in the kernel on its own behalf (sends, batched reads), beside its own code.
`make bench` prints these for the in-house SFU and the generator (bench/forwarding.py).
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

# The generator's functions: `main.` in its binary's profiles, its import path in its tests'.
SYNTH = r"(main|sfubench/synth)"
# The parts of the work, each by the functions that do it; a sample goes to the first part one of
# its frames belongs to, walking from the leaf. Frames of no part (the Go runtime's allocation,
# memmove, locks; the standard library's crypto) are passed over to the caller that asked for them.
PARTS = [
    ("system calls", re.compile(r"^(syscall\.|internal/runtime/syscall\.|golang\.org/x/sys/unix\.)")),
    ("SRTP", re.compile(r"^(github\.com/pion/srtp/|sfubench/sfu/inhouse/srtpkeys\.)")),
    # ours as pion's: the receive side's feedback (recvfb) and the send side's reports, resends and
    # their memory (client.Sender), which a publisher now calls past pion's interceptors
    ("RTCP and feedback", re.compile(r"^(github\.com/pion/(rtcp|interceptor)[./]|sfubench/sfu/inhouse/(recvfb|client)\.)")),
    ("routing", re.compile(r"^sfubench/sfu/inhouse/internal/")),
    ("receiving (fast path, counters, frames)",
     re.compile(rf"^{SYNTH}\.(\(\*(fastConn|fastConns|receiver|inbound|series|batch|poller)\)|digest|arrival)")),
    # the direct writer's own work (sfu/inhouse/directrtp: marshalling, queueing) is the sending of
    # whoever runs it; passed over, it went to pion's interceptor plumbing that calls it
    ("sending (pacers, packets, direct writes)",
     re.compile(rf"^({SYNTH}\.(\(\*(pacer|slot|vp8Stream|rtpStream|publisher|outbound|socket)\)|sleepUntil)"
                r"|sfubench/sfu/inhouse/directrtp\.)")),
    ("pion (tracks, ICE, DTLS)", re.compile(r"^github\.com/pion/")),
    ("posts to the engine (JSON, HTTP)", re.compile(r"^(encoding/json|net/http|net/textproto)\.")),
]
RUNTIME = "Go runtime (GC, scheduler)"
OTHER = "other"

LOCATION = re.compile(r"^\s*(\d+): 0x[0-9a-f]+ M=\d+ (\S+) ")
INLINED = re.compile(r"^\s+(\S+) \S+:\d+")
SAMPLE = re.compile(r"^\s*(\d+)\s+(\d+): ([\d ]+)$")


def raw(profile: Path) -> str:
    r = subprocess.run(["go", "tool", "pprof", "-raw", str(profile)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"go tool pprof -raw {profile}: {r.stderr.strip()[-500:]}")
    return r.stdout


def parse(text: str) -> tuple[list[tuple[int, list[int]]], dict[int, list[str]]]:
    """The samples (CPU nanoseconds, location ids leaf first) and each location's functions (the
    innermost inlined one first) of `go tool pprof -raw` output."""
    samples, locations = [], {}
    section, current = None, None
    for line in text.splitlines():
        if line.startswith("Samples:") or line.startswith("Locations"):
            section = line.split(":")[0].split()[0]
            continue
        if line and not line[0].isspace() and line.endswith(":") and section == "Locations":
            section = None  # "Mappings" and what follows
            continue
        if section == "Samples":
            m = SAMPLE.match(line)
            if m:
                samples.append((int(m.group(2)), [int(i) for i in m.group(3).split()]))
        elif section == "Locations":
            m = LOCATION.match(line)
            if m:
                current = locations.setdefault(int(m.group(1)), [])
                current.append(m.group(2))
            elif current is not None and (m := INLINED.match(line)):
                current.append(m.group(1))
    return samples, locations


def part_of(functions: list[str]) -> str:
    for fn in functions:
        for name, pattern in PARTS:
            if pattern.match(fn):
                return name
    if all(fn.startswith(("runtime.", "internal/runtime/")) for fn in functions):
        return RUNTIME
    return OTHER


def shares(profile: Path) -> dict[str, float]:
    """Each part's share of the profile's CPU time (0..1), largest first."""
    samples, locations = parse(raw(profile))
    spent: Counter = Counter()
    for ns, stack in samples:
        spent[part_of([fn for loc in stack for fn in locations.get(loc, [])])] += ns
    total = sum(spent.values())
    return {part: ns / total for part, ns in spent.most_common()} if total else {}


def table(named: dict[str, dict[str, float]]) -> list[str]:
    """Markdown lines: one column per process, one row per part."""
    parts = [p for p, _ in PARTS] + [RUNTIME, OTHER]
    parts = [p for p in parts if any(p in s for s in named.values())]
    lines = ["| part of the work | " + " | ".join(named) + " |", "|---|" + "---|" * len(named)]
    for p in parts:
        lines.append(f"| {p} | " + " | ".join(f"{s.get(p, 0) * 100:.0f} %" for s in named.values()) + " |")
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        named = {p: shares(Path(p)) for p in argv}
    except (RuntimeError, OSError) as e:
        print(f"cpushare: {e}", file=sys.stderr)
        return 1
    print("\n".join(table(named)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
