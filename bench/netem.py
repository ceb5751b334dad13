"""What the lab's link emulator (netem/) costs and how exactly it delays: UDP echoes across a link of
10 ms each way, at rising packet rates.

    .venv/bin/python bench/netem.py [--rates 1000,5000,10000] [--seconds 5]

For each rate, a sender in the clients' namespace sends 200-byte datagrams, an echo in the SFU's
namespace returns them, and the sender times each round trip: the emulator carries every datagram
twice, so its added-delay error is (round trip - 20 ms) / 2, reported at p50 and p99 per crossing,
with the datagrams lost and the emulator's CPU (cores, and frames per core-second). Not a test:
figures depend on the machine, printed beside them. Exit codes: 0 ok, 1 a step failed, 2 bad input,
130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# runnable as a plain script from a checkout, without installing the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sfubench import network  # noqa: E402
from sfubench.config import cache_root  # noqa: E402
from sfubench.lab import LocalLab  # noqa: E402

DELAY_MS = 10.0
PORT = 5998

ECHO = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(('@A@', @PORT@))
while True:
    d, peer = s.recvfrom(2048)
    s.sendto(d, peer)
"""

# Paces in 1 ms ticks (a batch per tick) and times each echo on the same clock it stamped it with.
SEND = """
import json, socket, struct, threading, time
rate, seconds = @RATE@, @SECONDS@
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(('@MINE@', 0))
s.settimeout(1.0)
rtts = []
def receive():
    while True:
        try:
            d = s.recv(2048)
        except socket.timeout:
            return
        rtts.append(time.monotonic_ns() - struct.unpack('!q', d[:8])[0])
t = threading.Thread(target=receive)
t.start()
pad = bytes(192)
sent, start = 0, time.monotonic()
while (now := time.monotonic()) < start + seconds:
    due = int((now - start) * rate) + 1
    while sent < due:
        s.sendto(struct.pack('!q', time.monotonic_ns()) + pad, ('@A@', @PORT@))
        sent += 1
    time.sleep(0.001)
t.join()
print(json.dumps({"sent": sent, "rtt_ns": rtts}))
"""


def script(text: str, **values) -> str:
    for key, value in {"PORT": PORT, **values}.items():
        text = text.replace(f"@{key.upper()}@", str(value))
    return text


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


def step(lab: LocalLab, emu: network.Emulator, rate: int, seconds: float) -> dict:
    before, t0 = cpu_s(emu.proc.pid), time.monotonic()
    r = subprocess.run(lab.clients.command([sys.executable, "-c", script(
        SEND, rate=rate, seconds=seconds, a=lab.sfu.address, mine=lab.clients.address)]),
        capture_output=True, text=True, timeout=seconds + 30)
    cores = (cpu_s(emu.proc.pid) - before) / (time.monotonic() - t0)
    if r.returncode:
        raise RuntimeError(f"the sender failed: {r.stderr.strip()[-500:]}")
    out = json.loads(r.stdout)
    errors = [(ns / 1e6 - 2 * DELAY_MS) / 2 for ns in out["rtt_ns"]]
    frames = 2 * len(out["rtt_ns"]) / seconds
    return {"rate": rate, "sent": out["sent"], "lost_pct": 100 * (1 - len(errors) / out["sent"]),
            "error_ms_p50": pct(errors, 50) if errors else None, "error_ms_p99": pct(errors, 99) if errors else None,
            "cores": cores, "frames_per_core_s": frames / cores if cores > 0 else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="1000,5000,10000", help="datagrams per second, one step each")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--lab-prefix", default="sfubnb")
    p.add_argument("--lab-subnet", default="127.0.10")
    a = p.parse_args(argv)
    try:
        rates = [int(r) for r in a.rates.split(",") if r.strip()]
    except ValueError:
        rates = []
    if not rates or min(rates) < 1 or a.seconds <= 0:
        print("netem: --rates must list positive integers and --seconds be positive", file=sys.stderr)
        return 2
    link = network.Network("bench", network.Direction(delay_ms=DELAY_MS), network.Direction(delay_ms=DELAY_MS))
    binary = network.binary(cache_root())
    rows = []
    try:
        with LocalLab(a.lab_prefix, a.lab_subnet, emulated=True) as lab, tempfile.TemporaryDirectory() as tmp:
            emu = network.Emulator(binary, lab.link, link, Path(tmp))
            emu.start()
            echo = subprocess.Popen(lab.sfu.command([sys.executable, "-c", script(ECHO, a=lab.sfu.address)]))
            time.sleep(1.0)
            try:
                for rate in rates:
                    print(f"netem: {rate} datagrams/s for {a.seconds:g} s", flush=True)
                    rows.append(step(lab, emu, rate, a.seconds))
            finally:
                echo.kill()
                emu.stop()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"netem: {e}", file=sys.stderr)
        return 1
    print(f"\nThe link emulator, {DELAY_MS:g} ms each way (added-delay error per crossing):")
    print("| datagrams/s | lost (%) | error p50 (ms) | error p99 (ms) | emulator cores | frames per core-second |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        def f(v, spec):
            return "-" if v is None else format(v, spec)
        print(f"| {r['rate']} | {r['lost_pct']:.2f} | {f(r['error_ms_p50'], '.2f')} | {f(r['error_ms_p99'], '.2f')} | "
              f"{r['cores']:.3f} | {f(r['frames_per_core_s'], '.0f')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
