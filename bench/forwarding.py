"""Forwarding cost of the in-house SFU against Janus under the same synthetic load, side by side.

    .venv/bin/python bench/forwarding.py [--sfus inhouse,janus] [--rooms 1,2,4] [--duration S]

For each SFU: the local lab, the SFU started by its adapter (as `sfubench loadtest` does), then
bench/forwarding (pion publishers and subscribers in rooms of 7, built once into the cache) from the
clients' side of the lab, reading the SFU's CPU time from /proc. Janus cannot run on the loopback
interface, which is why this goes through the lab rather than `go run . -spawn`. The issue's goal
is in-house <= 0.5x Janus CPU per forwarded stream. Not a test: figures depend on the machine and
its load, printed beside them. Exit codes: 0 ok, 1 a run failed, 2 bad input, 130 interrupted.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# runnable as a plain script from a checkout, without installing the package
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sfubench.config import cache_root  # noqa: E402
from sfubench.lab import LocalLab  # noqa: E402
from sfubench.sfu import Adapter, AdapterError, render  # noqa: E402

BENCH_SRC = ROOT / "bench" / "forwarding"
# bench/forwarding imports the in-house SFU's client, so its sources go into the binary too.
SOURCES = (BENCH_SRC, ROOT / "sfu" / "inhouse")


class BenchError(RuntimeError):
    pass


class _Terminated(KeyboardInterrupt):
    """SIGTERM takes the same clean-up path as Ctrl-C."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def build_bench(cache: Path) -> Path:
    """The bench binary for the current sources and toolchain; built only when they changed."""
    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True)
    if go.returncode:
        raise BenchError("Go >= 1.26 is needed to build bench/forwarding and is not on PATH")
    h = hashlib.sha256(go.stdout.encode())
    for src in SOURCES:
        for f in sorted(src.rglob("*")):
            if f.name in ("go.mod", "go.sum") or (f.suffix == ".go" and not f.name.endswith("_test.go")):
                h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    binary = cache / f"fwdbench-{h.hexdigest()[:16]}"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    r = subprocess.run(["go", "build", "-trimpath", "-o", str(tmp), "."], cwd=BENCH_SRC,
                       capture_output=True, text=True, env={**os.environ, "GOFLAGS": "-mod=readonly"})
    if r.returncode:
        raise BenchError(f"building bench/forwarding failed: {r.stderr.strip()[-2000:]}")
    tmp.rename(binary)
    # Only the current build is ever used; older ones would pile up in the cache.
    for old in cache.glob("fwdbench-*"):
        if old != binary:
            old.unlink()
    return binary


def measure(adapter: Adapter, bench: Path, cache: Path, rooms: list[int], duration: float,
            warmup: float, prefix: str, subnet: str) -> dict:
    """Runs the bench against one SFU in a fresh lab; returns the bench's JSON."""
    sfu = adapter.name
    print(f"{sfu}: installing {adapter.version} (skipped when installed)", flush=True)
    adapter.install(cache)
    lab = LocalLab(prefix, subnet)
    with tempfile.TemporaryDirectory(prefix=f"sfubf-{sfu}-") as tmp:
        run_dir = Path(tmp)
        lab.up()
        try:
            # The health check runs from this process and must take the clients' path to the SFU.
            with lab.inside_clients():
                server = adapter.start(lab.sfu, run_dir, cache)
            try:
                values = adapter.values(lab.sfu, run_dir / "sfu-conf", cache, run_dir)
                url = render(adapter.data["client_params"]["server"], values, f"{sfu} client_params.server")
                argv = [str(bench), "-json", "-sfu", sfu, "-url", url, "-pid", str(server.pids()[0]),
                        "-client-ip", lab.clients.address, "-rooms", ",".join(map(str, rooms)),
                        "-duration", f"{duration}s", "-warmup", f"{warmup}s"]
                print(f"{sfu}: {len(rooms)} room count(s) x {duration:g} s at {lab.sfu.address}; "
                      f"load average {loadavg()}", flush=True)
                # Joining and the wait for every stream are bounded in the bench (15 s + 30 s).
                timeout = 30 + sum(60 + duration + warmup for _ in rooms)
                try:
                    r = subprocess.run(lab.clients.command(argv), capture_output=True, text=True,
                                       timeout=timeout)
                except subprocess.TimeoutExpired:
                    raise BenchError(f"{sfu}: the bench did not finish within {timeout:.0f} s") from None
                if r.returncode:
                    log = server.log.read_text(errors="replace").strip().splitlines()[-5:]
                    raise BenchError(f"{sfu}: {r.stderr.strip()[-1500:]}\n{sfu} log: " + "\n".join(log))
                return json.loads(r.stdout)
            finally:
                server.stop()
        finally:
            lab.down()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def table(results: dict[str, dict]) -> str:
    """Markdown, one row per room count, each SFU's figure in a cell as a / b in --sfus order."""
    sfus = list(results)
    ratio = "inhouse" in results and "janus" in results
    head = ["rooms", "fwd streams", "SFU CPU %", "of it kernel %", "CPU ms per fwd stream-s"]
    if ratio:
        head.append("inhouse / janus")
    head += ["MHz per pub stream", "MHz per fwd stream", "loss %", "p50 ms", "p95 ms"]
    lines = [f"({' / '.join(sfus)} in each cell)", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    rows = {sfu: {row["rooms"]: row for row in results[sfu]["rows"]} for sfu in sfus}
    for n in sorted(set.intersection(*(set(r) for r in rows.values()))):
        cells = [rows[sfu][n] for sfu in sfus]

        def each(key, fmt):
            return " / ".join(format(c[key], fmt) for c in cells)

        line = [str(n), str(cells[0]["forwarded_streams"]), each("sfu_cpu_pct", ".1f"),
                each("sfu_kernel_pct", ".0f"), each("cpu_ms_per_fwd_stream_s", ".3f")]
        if ratio:
            cost = {sfu: rows[sfu][n]["cpu_ms_per_fwd_stream_s"] for sfu in ("inhouse", "janus")}
            line.append(f"{cost['inhouse'] / cost['janus']:.2f}x")
        line += [each("mhz_per_pub_stream", ".2f"), each("mhz_per_fwd_stream", ".2f"),
                 each("loss_pct", ".3f"), each("p50_ms", ".2f"), each("p95_ms", ".2f")]
        lines.append("| " + " | ".join(line) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sfus", default="inhouse,janus", help="adapters to compare, in order")
    p.add_argument("--rooms", default="1,2,4", help="room counts (rooms of 7)")
    p.add_argument("--duration", type=float, default=10, help="seconds measured per room count")
    p.add_argument("--warmup", type=float, default=3,
                   help="seconds after everyone receives everyone before measuring")
    p.add_argument("--lab-prefix", default="sfubf", help="lab names, so a loadtest can run beside")
    p.add_argument("--lab-subnet", default="127.0.6", help="the lab's /24 inside 127.0.0.0/8")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    a = p.parse_args(argv)
    sfus = [s.strip() for s in a.sfus.split(",") if s.strip()]
    try:
        rooms = [int(n) for n in a.rooms.split(",")]
        if not sfus or min(rooms) < 1 or a.duration <= 0 or a.warmup < 0:
            raise ValueError
    except ValueError:
        print(f"bad --sfus/--rooms/--duration/--warmup: {a.sfus!r} {a.rooms!r} {a.duration} {a.warmup}",
              file=sys.stderr)
        return 2
    try:
        adapters = [Adapter.load(s) for s in sfus]
    except AdapterError as e:
        print(f"forwarding: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_sigterm)
    cache = cache_root()
    results, load = {}, {"before": loadavg()}
    try:
        bench = build_bench(cache)
        for adapter in adapters:
            results[adapter.name] = measure(adapter, bench, cache, rooms, a.duration, a.warmup,
                                            a.lab_prefix, a.lab_subnet)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        print(f"forwarding: {e}", file=sys.stderr)
        return 1
    load["after"] = loadavg()
    first = results[sfus[0]]
    print(f"\nforwarding cost: rooms of {first['room_size']}, each participant publishing "
          f"{first['video_bytes']} B video at {first['video_pps']} pps + {first['audio_bytes']} B audio "
          f"at {first['audio_pps']} pps and receiving the others; {a.duration:g} s per row; "
          f"{first['cpu_mhz']:.0f} MHz cores; load average {load['before']} before, {load['after']} after; "
          f"direct pion median {first['baseline_p50_ms']:.2f} ms")
    print(table(results))
    if a.json:
        a.json.write_text(json.dumps({"loadavg": load, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
