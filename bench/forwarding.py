"""What forwarding costs each SFU, and what the synthetic load generator sustains: the same load test
as `make loadtest`, with synthetic participants only.

    .venv/bin/python bench/forwarding.py [--sfus inhouse,janus,janus-tuned] [--rooms 12] [--knee-load 42]
                                         [--codec h264,vp9,av1] [--codec-sfu inhouse]

For each SFU, an all-synthetic ramp (`--real-rooms 0`), one room more per step, with the SFU pinned
to CPU 0 and the generator to CPU 1 so neither takes the other's core. From each run folder (the
same reports as any run): the SFU's CPU per forwarded packet and per forwarded stream at each step,
and the in-house/Janus ratio; then the generator's cost: cores per received stream and its pacing
error (99th percentile), and the streams it sustains per core while that stays under 1 ms and its
sockets drop nothing (the receive-buffer drops of the clients' network namespace).
An SFU named `ADAPTER-PROFILE` (`janus-tuned`) runs that adapter with that profile (`--sfu-profile`).

The summary (printed, and `summary` in `--json`): the generator's `streams_per_core` at the most
participants of a window whose pacing p99 stayed under 1 ms and whose sockets dropped nothing
(over every such window at that count, of every SFU's run: `windows` of them), `received_streams`,
`pacing_p99_ms` (the worst of them) and `socket_drops` there, its `share_of_kernel_ceiling` (of
the streams per core the kernel's floor, measured in the same run, allows: `kernel_floor`) and
`us_per_received_packet` (its CPU, its sending included, per packet received); `machine` (the CPU
model and count the figures are of); each SFU's `us_per_forwarded_packet` at the
knee load (`--knee-load`: Janus's knee in the default study on the project's 2-core machine, the
least of the local SFUs') and
`us_per_forwarded_packet_2x` at twice it, null where the run did not reach the load with the
clients' headroom, or where the SFU carried more than its media or forwarded under half of its
usual packets a stream (past its knee; each such count is printed as left out); its
`socket_drops_per_s` and `socket_drops_per_s_2x` there, the datagrams a second its sockets dropped
for full receive buffers (an SFU at its limit, said beside the table; null where its cost is, or
where they were not counted); and the in-house SFU's ratios to the others at both loads.

`--codec` names codecs besides VP8 to measure the generator in: after the SFUs' runs, the same ramp
against `--codec-sfu` (the in-house SFU: the cheapest, so the generator is what the ramp loads) once
per codec. `summary.generator.codecs` gives, for VP8 (that SFU's run above) and each codec, the
generator's `streams_per_core` as above and `cost_vs_vp8`, its CPU per received stream over VP8's
in the same round (the packets are the same work in any codec; only the readers differ).

`--repeat R` runs every SFU R times, in rounds (A B C, A B C: drift in the machine falls on all).
Each ratio is taken within a round; the summary gives the median over the rounds, and beside each
figure its `_runs` (one value per round) and `_spread` ((max - min) / median). `summary.runs` is R;
`cost` and `generator` are the first round's, `rounds` every round's. Not a test: figures depend on
the machine and its load, printed beside them. Exit codes: 0 ok, 1 a run failed, 2 bad input, 130
interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# runnable as a plain script from a checkout, without installing the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cpushare  # noqa: E402  (bench/, beside this script)
import kernelfloor  # noqa: E402
from reports import metrics, runfiles, traffic, windows  # noqa: E402
from sfubench import config, loadtest  # noqa: E402
from sfubench.agent import machine_facts  # noqa: E402
from sfubench.progress import Progress  # noqa: E402
from sfubench.rundir import read  # noqa: E402

PACING_MS = 1.0   # the generator's pacing target: p99 under a millisecond
FELL = 0.5        # of its usual packets a stream: an SFU that forwards less has given way
SFUS = "janus,janus-tuned,mediasoup,livekit,medooze,inhouse"
KNEE_LOAD = 42    # participants: Janus's knee in the default study (0.5 core), rooms of 7
GENERATOR_PROFILE_ENV = "SFUBENCH_SYNTH_PROFILE"   # synth/profile.go: its folder gets cpu.pprof
PROFILED_SFUS = ("inhouse",)   # adapters with a cpu_profile option
SFU_PROFILE = "sfu.pprof"


def generator_rows(run_dir: Path) -> list[dict]:
    """Per measured window: streams the generator received, its cores (the clients' cgroup holds
    only it: no browsers), its pacing error and the datagrams its sockets dropped for a full
    receive buffer (None where the namespace's counters were not read)."""
    edges: dict = {}
    for r in read(run_dir, "server"):
        if r.get("role") == "clients" and r.get("edge") in ("start", "end"):
            edges.setdefault(r["window"], {})[r["edge"]] = r
    streams: dict = {}
    for s in runfiles.iter_measured_samples(runfiles.load(run_dir)):
        if s.get("direction") == "recv":
            streams.setdefault(s["window"], set()).add(windows.stream_key(s))
    out = []
    for w in read(run_dir, "windows"):
        e = edges.get(w["window"], {})
        if w["phase"] == "background" or "start" not in e or "end" not in e or w["window"] not in streams:
            continue
        seconds = (e["end"]["t"] - e["start"]["t"]) / 1000
        cpu_s = e["end"]["cpu_s"] - e["start"]["cpu_s"]
        cores = cpu_s / seconds
        n = len(streams[w["window"]])
        drops = [x.get("udp_rcvbuf_errors") for x in (e["start"], e["end"])]
        out.append({"participants": w["participants"], "phase": w["phase"], "received_streams": n,
                    "seconds": seconds, "cpu_s": cpu_s, "cores": cores,
                    "streams_per_core": n / cores if cores > 0 else None,
                    "pacing_ms_p99": w.get("pacing_ms_p99"),
                    "socket_drops": drops[1] - drops[0] if None not in drops else None})
    return out


def measure(name: str, rooms: int, users: int, out: Path, prefix: str, subnet: str, profiles: Path,
            codec: str = config.CODECS[0]) -> Path:
    """One all-synthetic ramp of SFU `name` in `codec`; the generator's CPU profile goes to
    `profiles`, and so does the SFU's where its adapter takes a `cpu_profile` option (the in-house
    SFU)."""
    sfu, _, profile = name.partition("-")
    profiles.mkdir(parents=True, exist_ok=True)
    options = f"cpu_profile={profiles / SFU_PROFILE}" if sfu in PROFILED_SFUS else ""
    cfg = config.load(cli={
        "sfu": sfu, "sfu_profile": profile or "defaults", "sfu_options": options, "preset": "browsers", "rooms": rooms,
        "users_per_room": users, "real_rooms": 0, "quality_frames": 0,
        "background_interval": 0, "ramp_samples": 4, "target_samples": 6, "sfu_cpuset": "0",
        "client_cpuset": "1", "out": str(out), "lab_prefix": prefix, "lab_subnet": subnet,
        "results_db": str(out / "results.sqlite"), "codec": codec}, env={})
    print(f"{name}: an all-synthetic ramp to {rooms} rooms of {users}"
          + (f" in {codec.upper()}" if codec != config.CODECS[0] else ""), flush=True)
    os.environ[GENERATOR_PROFILE_ENV] = str(profiles)  # the generator inherits the engine's environment
    try:
        run_dir, status = loadtest.run(cfg, Progress(open(os.devnull, "w")))
    finally:
        del os.environ[GENERATOR_PROFILE_ENV]
    if status != "ok":
        raise RuntimeError(f"{name}: the run ended {status}; see {run_dir}")
    return run_dir


def cpu_shares(profiles: dict[str, Path]) -> dict[str, dict[str, float]]:
    """Where the CPU went in each SFU run: the SFU's share by part of the work where it was
    profiled, and the generator's."""
    out = {}
    for sfu, folder in profiles.items():
        for label, path in ((f"{sfu} SFU", folder / SFU_PROFILE), (f"generator ({sfu})", folder / "cpu.pprof")):
            if path.exists():
                out[label] = cpushare.shares(path)
    return out


def forwarding_fell(cost: list[dict]) -> dict[int, str]:
    """The counts at which the SFU forwarded under FELL of its usual packets per stream (the run's
    median), each with why it is left out: past its knee an SFU spends its CPU on media it no
    longer forwards, and its cost per forwarded packet there is no cost of forwarding (Medooze once
    forwarded 13 packets/s a stream at 84 participants against 62 before: 78 µs a packet)."""
    rates = {r["participants"]: r["fwd_pps"] / r["fwd_streams"] for r in cost
             if r.get("fwd_pps") is not None and r.get("fwd_streams")}
    if not rates:
        return {}
    usual = statistics.median(rates.values())
    return {n: f"At {n} participants the SFU forwarded {rate:.0f} packets/s a stream, under {FELL:.0%} of its usual "
               f"{usual:.0f} in the run: past its knee, so its cost there is not what forwarding costs it."
            for n, rate in rates.items() if rate < FELL * usual}


def sfu_cost(analysis: metrics.Analysis) -> dict[int, dict]:
    """The cost rows by participants, of the counts where the clients had headroom and the SFU
    carried its media and little else (a driver flooding its signalling makes the cost its own)
    without falling short of it (forwarding_fell)."""
    bound = {h["participants"] for h in analysis.health if h["client_bound"]}
    fell = forwarding_fell(analysis.cost)
    return {r["participants"]: r for r in analysis.cost
            if r["participants"] not in bound and r["participants"] not in fell and not traffic.anomalies([r])}


def generator_sustained(generator: dict[str, list[dict]]) -> dict:
    """The generator at the most participants it sustained (pacing p99 under PACING_MS, no socket
    drops), over every such window at that count of every SFU's run: their stream-seconds over the
    CPU-seconds they took, as the SFU's cost at a count is its windows' (reports/cost.py), and the
    streams it received there on average (an SFU may forward a few streams short). One
    window of a few seconds reads the generator cheaper or dearer than its load: 84 participants
    held two minutes gave 2-second windows from 0.24 to 0.40 core. The best window, which this took
    before, read a quarter over what the generator costs (4,208 streams per core against 3,355 pooled)."""
    sustained = [r for rows in generator.values() for r in rows if r["pacing_ms_p99"] is not None
                 and r["pacing_ms_p99"] < PACING_MS and r["socket_drops"] == 0 and r["streams_per_core"]]
    if not sustained:
        return {"streams_per_core": None, "pacing_p99_ms": None, "socket_drops": None, "participants": None,
                "received_streams": None, "windows": 0}
    top = max(r["participants"] for r in sustained)
    at_top = [r for r in sustained if r["participants"] == top]
    stream_seconds = sum(r["received_streams"] * r["seconds"] for r in at_top)
    return {"streams_per_core": stream_seconds / sum(r["cpu_s"] for r in at_top),
            "pacing_p99_ms": max(r["pacing_ms_p99"] for r in at_top), "socket_drops": 0,
            "participants": top, "received_streams": stream_seconds / sum(r["seconds"] for r in at_top),
            "windows": len(at_top)}


def summary(cost: dict[str, dict], generator: dict[str, list[dict]], knee_load: int,
            by_codec: dict[str, list[dict]] | None = None) -> dict:
    """What `make bench` reports: the generator's sustained streams per core, each SFU's cost per
    forwarded packet at the knee load and at twice it, and the in-house SFU's ratios; with
    `by_codec` (the generator's rows in each codec against one SFU, VP8's first), the generator in
    each codec beside VP8."""
    gen = generator_sustained(generator)
    if by_codec:
        gen["codecs"] = codec_costs(by_codec)

    def at(sfu, n, key="sfu_us_per_packet"):
        row = cost[sfu].get(n)
        return row and row.get(key)
    sfus = {s: {"participants": knee_load, "us_per_forwarded_packet": at(s, knee_load),
                "us_per_forwarded_packet_2x": at(s, 2 * knee_load),
                "socket_drops_per_s": at(s, knee_load, "sfu_udp_drops"),
                "socket_drops_per_s_2x": at(s, 2 * knee_load, "sfu_udp_drops")} for s in cost}
    ratios = {}
    if "inhouse" in sfus:
        for other in (s for s in sfus if s != "inhouse"):
            for key in ("us_per_forwarded_packet", "us_per_forwarded_packet_2x"):
                a, b = sfus["inhouse"][key], sfus[other][key]
                ratios.setdefault(f"inhouse/{other}", {})[key] = a / b if a and b else None
    return {"generator": gen, "sfus": sfus, "ratios": ratios, "runs": 1}


def codec_costs(by_codec: dict[str, list[dict]]) -> dict[str, dict]:
    """The generator sustained in each codec (`by_codec`'s first is VP8), and its CPU per received
    stream over VP8's (the inverse ratio of their streams per core)."""
    out = {c: generator_sustained({c: rows}) for c, rows in by_codec.items()}
    vp8 = out[config.CODECS[0]]["streams_per_core"]
    for g in out.values():
        g["cost_vs_vp8"] = vp8 / g["streams_per_core"] if vp8 and g["streams_per_core"] else None
    return {c: {k: g[k] for k in ("streams_per_core", "participants", "pacing_p99_ms", "cost_vs_vp8")}
            for c, g in out.items()}


def floor_at(cost: dict[str, dict], users: int) -> dict | None:
    """The kernel's floor (bench/kernelfloor.py) at the runs' packet rates: the median packets per
    second of a forwarded stream over every SFU's counts; None where it could not be measured."""
    rates = [r["fwd_pps"] / r["fwd_streams"] for rows in cost.values() for r in rows.values() if r.get("fwd_streams")]
    try:
        floor = kernelfloor.measure()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"forwarding: the kernel's floor was not measured: {e}", flush=True)
        return None
    if not rates:
        return floor
    pps = statistics.median(rates)
    return {**floor, "pps_per_stream": pps, "streams_per_core_ceiling": kernelfloor.ceiling(floor, pps, users)}


def against_the_kernel(gen: dict, floor: dict | None) -> dict:
    """The generator's sustained streams per core against the kernel's floor measured in the same run,
    so that the figure means the same on any machine: its `share_of_kernel_ceiling`, and its
    `us_per_received_packet` (all its CPU, its own sending included, over the packets it received,
    at the floor's packets per stream), to set beside an SFU's per forwarded packet; None where
    either was not measured."""
    per_core, ceiling = gen.get("streams_per_core"), (floor or {}).get("streams_per_core_ceiling")
    if not per_core or not ceiling:
        return {"share_of_kernel_ceiling": None, "us_per_received_packet": None}
    return {"share_of_kernel_ceiling": per_core / ceiling,
            "us_per_received_packet": 1e6 / (per_core * floor["pps_per_stream"])}


def combined(rounds: list[dict]) -> dict:
    """One summary of several rounds' (`summary`): each figure the median of the rounds that have
    it, with its values (`KEY_runs`) and their spread ((max - min) / median)."""
    def merge(parts: list[dict]) -> dict:
        out = {}
        for key, first in parts[0].items():
            values = [p.get(key) for p in parts]
            if isinstance(first, dict):
                out[key] = merge([v or {} for v in values])
            elif key == "runs":
                continue
            elif key == "participants":
                out[key] = first
            else:
                known = [v for v in values if v is not None]
                mid = statistics.median(known) if known else None
                out[key] = mid
                out[f"{key}_runs"] = values
                out[f"{key}_spread"] = (max(known) - min(known)) / mid if mid else None
        return out
    out = merge(rounds)
    out["runs"] = len(rounds)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sfus", default=SFUS, help="adapters to compare, in order (ADAPTER-PROFILE for a profile)")
    p.add_argument("--rooms", type=int, default=12, help="rooms the ramp adds, one per step")
    p.add_argument("--users-per-room", type=int, default=7)
    p.add_argument("--knee-load", type=int, default=KNEE_LOAD,
                   help="participants at which the summary compares SFUs (and twice it)")
    p.add_argument("--lab-prefix", default="sfubf", help="lab names, so a loadtest can run beside")
    p.add_argument("--lab-subnet", default="127.0.6", help="the lab's /24 inside 127.0.0.0/8")
    p.add_argument("--repeat", type=int, default=1, help="rounds: every SFU this many times, interleaved")
    p.add_argument("--codec", default="", help="codecs besides VP8 to measure the generator in (h264,vp9,av1)")
    p.add_argument("--codec-sfu", default="inhouse", help="the SFU the codecs' ramps run against (one of --sfus)")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    a = p.parse_args(argv)
    sfus = [s.strip() for s in a.sfus.split(",") if s.strip()]
    codecs = [c.strip() for c in a.codec.split(",") if c.strip()]
    if not sfus or a.rooms < 1 or a.users_per_room < 2 or a.knee_load < 1 or a.repeat < 1:
        print("forwarding: --sfus must name adapters, --rooms >= 1, --users-per-room >= 2, --knee-load >= 1, "
              "--repeat >= 1", file=sys.stderr)
        return 2
    if wrong := [c for c in codecs if c not in config.SYNTHETIC_CODECS[1:]]:
        print(f"forwarding: --codec takes {', '.join(config.SYNTHETIC_CODECS[1:])}, not {', '.join(wrong)}",
              file=sys.stderr)
        return 2
    if codecs and a.codec_sfu not in sfus:
        print(f"forwarding: --codec-sfu {a.codec_sfu} is not one of --sfus ({a.sfus})", file=sys.stderr)
        return 2
    if (os.cpu_count() or 1) < 2:
        print("forwarding: the SFU and the generator each need a core of their own", file=sys.stderr)
        return 2
    out = Path(tempfile.mkdtemp(prefix="sfubench-bench-forwarding-"))
    rounds = []
    try:
        for i in range(a.repeat):
            cost, generator, profiles = {}, {}, {}
            for sfu in sfus:
                if a.repeat > 1:
                    print(f"round {i + 1} of {a.repeat}: ", end="", flush=True)
                profiles[sfu] = out / f"profiles-{sfu}-{i + 1}"
                run_dir = measure(sfu, a.rooms, a.users_per_room, out, a.lab_prefix, a.lab_subnet, profiles[sfu])
                analysis = metrics.analyse(runfiles.load(run_dir))
                for why in [*traffic.anomalies(analysis.cost), *forwarding_fell(analysis.cost).values()]:
                    print(f"{sfu}: left out: {why}", flush=True)
                cost[sfu] = sfu_cost(analysis)
                generator[sfu] = generator_rows(run_dir)
            by_codec = {config.CODECS[0]: generator[a.codec_sfu]} if codecs else {}
            for codec in codecs:
                run_dir = measure(a.codec_sfu, a.rooms, a.users_per_room, out, a.lab_prefix, a.lab_subnet,
                                  out / f"profiles-{a.codec_sfu}-{codec}-{i + 1}", codec)
                by_codec[codec] = generator_rows(run_dir)
            rounds.append({"cost": cost, "generator": generator, "codecs": by_codec,
                           "summary": summary(cost, generator, a.knee_load, by_codec),
                           "cpu_shares": cpu_shares(profiles)})
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (config.ConfigError, RuntimeError, OSError) as e:
        print(f"forwarding: {e}", file=sys.stderr)
        return 1
    cost, generator = rounds[0]["cost"], rounds[0]["generator"]

    print(f"\nSFU cost, all-synthetic rooms of {a.users_per_room} (SFU on CPU 0, generator on CPU 1; "
          f"{' / '.join(sfus)} in each cell{'; the first round' if a.repeat > 1 else ''}):")
    ratio = "inhouse" in cost and "janus" in cost
    print("| participants | forwarded packets/s | SFU cores | µs per packet | MHz per forwarded stream | "
          "SFU socket drops/s |" + (" inhouse / janus per packet |" if ratio else ""))
    print("|---|---|---|---|---|---|" + ("---|" if ratio else ""))
    for n in sorted(set.intersection(*(set(c) for c in cost.values()))):
        cells = [cost[s][n] for s in sfus]

        def each(key, fmt):
            return " / ".join("-" if c.get(key) is None else format(c[key], fmt) for c in cells)
        line = (f"| {n} | {each('fwd_pps', '.0f')} | {each('sfu_cores_fwd', '.3f')} | "
                f"{each('sfu_us_per_packet', '.1f')} | {each('sfu_mhz_per_stream', '.2f')} | "
                f"{each('sfu_udp_drops', '.1f')} |")
        if ratio:
            line += f" {cost['inhouse'][n]['sfu_us_per_packet'] / cost['janus'][n]['sfu_us_per_packet']:.2f}x |"
        print(line)

    print(f"\nThe synthetic generator (its own cgroup on CPU 1; pacing target p99 < {PACING_MS:g} ms, no socket drops):")
    print("| SFU | participants | received streams | generator cores | streams per core | pacing p99 (ms) | socket drops |")
    print("|---|---|---|---|---|---|---|")
    for sfu, rows in generator.items():
        for r in rows:
            drops = "-" if r["socket_drops"] is None else r["socket_drops"]
            print(f"| {sfu} | {r['participants']} ({r['phase']}) | {r['received_streams']} | {r['cores']:.3f} | "
                  f"{r['streams_per_core'] or 0:.0f} | {r['pacing_ms_p99']} | {drops} |")
    shares = rounds[0]["cpu_shares"]
    if shares:
        print(f"\nWhere the CPU went over each run (pprof, each sample to the part of the work nearest its leaf; "
              f"profiles in {out}{', the first round' if a.repeat > 1 else ''}):")
        print("\n".join(cpushare.table(shares)))
    result = combined([r["summary"] for r in rounds])
    floor = result["generator"]["kernel_floor"] = floor_at(cost, a.users_per_room)
    result["generator"].update(against_the_kernel(result["generator"], floor))
    result["machine"] = {k: machine_facts()[k] for k in ("cpu_model", "cpus")}
    print_summary(result, a.knee_load)
    if a.json:
        a.json.write_text(json.dumps({"cost": cost, "generator": generator, "summary": result, "cpu_shares": shares,
                                      "rounds": rounds}, indent=1, default=str))
    return 0


def print_summary(result: dict, knee_load: int) -> None:
    runs = result["runs"]
    gen = result["generator"]
    if gen["streams_per_core"]:
        print(f"\nsustained with pacing p99 < {PACING_MS:g} ms and no socket drops: up to {gen['participants']:.0f} participants "
              f"({gen['received_streams']:.0f} received streams) "
              f"at {gen['streams_per_core']:.0f} streams per core over the {gen['windows']:.0f} windows at that count "
              f"(pacing p99 {gen['pacing_p99_ms']} ms at worst)"
              + (f", the median of {runs} rounds{spread(gen, 'streams_per_core')}" if runs > 1 else ""))
    else:
        print(f"\nno step kept the pacing p99 under {PACING_MS:g} ms with no socket drops")
    floor = gen.get("kernel_floor")
    if floor and "streams_per_core_ceiling" in floor:
        print(f"the kernel's floor here: a batched read {floor['receive_us']:.2f} µs and a send {floor['send_us']:.2f} µs "
              f"of CPU per datagram; at {floor['pps_per_stream']:.0f} packets/s a stream, no generator could pass "
              f"{floor['streams_per_core_ceiling']:,.0f} received streams per core (bench/kernelfloor.py); "
              f"a send that wakes the SFU's reader {floor['waking_send_us']:.2f} µs")
    if gen.get("share_of_kernel_ceiling"):
        machine = result.get("machine") or {}
        print(f"the generator reached {gen['share_of_kernel_ceiling']:.2f}x that ceiling on {machine.get('cpu_model')} "
              f"({machine.get('cpus')} CPUs): {gen['us_per_received_packet']:.1f} µs of its CPU per packet it received, "
              "its own sending included")
    print_codecs(gen.get("codecs") or {}, runs)

    def num(part, key, fmt):
        v = part.get(key)
        return ("-" if v is None else format(v, fmt)) + (spread(part, key) if runs > 1 and v is not None else "")
    print(f"\nCPU per forwarded packet at {knee_load} participants and at {2 * knee_load} (µs; '-': not reached "
          f"with the clients' headroom, or left out as said above), " + (f"the median of {runs} rounds (its spread):" if runs > 1 else "one run:"))
    print(f"| SFU | at {knee_load} | at {2 * knee_load} | inhouse / SFU at {knee_load} | inhouse / SFU at {2 * knee_load} |")
    print("|---|---|---|---|---|")
    for sfu, v in result["sfus"].items():
        r = result["ratios"].get(f"inhouse/{sfu}", {})
        print(f"| {sfu} | {num(v, 'us_per_forwarded_packet', '.1f')} | {num(v, 'us_per_forwarded_packet_2x', '.1f')} | "
              f"{num(r, 'us_per_forwarded_packet', '.2f')} | {num(r, 'us_per_forwarded_packet_2x', '.2f')} |")
    for sfu, v in result["sfus"].items():
        for n, key in ((knee_load, "socket_drops_per_s"), (2 * knee_load, "socket_drops_per_s_2x")):
            if v.get(key):
                print(f"{sfu} at {n}: its sockets dropped {v[key]:.1f} datagrams a second for full receive buffers "
                      "(at its limit there; its cost is still per packet it forwarded)")


def print_codecs(codecs: dict[str, dict], runs: int) -> None:
    """The generator's streams per core in each codec, beside VP8's against the same SFU."""
    if not codecs:
        return
    print("\nThe generator in each codec (the same ramp against one SFU; sustained as below):")
    print("| codec | participants | streams per core | CPU per received stream / VP8's |")
    print("|---|---|---|---|")
    for codec, g in codecs.items():
        def cell(key, fmt):
            return "-" if g.get(key) is None else format(g[key], fmt) + (spread(g, key) if runs > 1 else "")
        print(f"| {codec} | {cell('participants', '.0f')} | {cell('streams_per_core', '.0f')} | "
              f"{cell('cost_vs_vp8', '.2f')} |")


def spread(part: dict, key: str) -> str:
    """` (±N %)`: half the spread of `key`'s rounds, as a share of their median."""
    s = part.get(f"{key}_spread")
    return "" if s is None else f" (±{s * 50:.0f} %)"


if __name__ == "__main__":
    sys.exit(main())
