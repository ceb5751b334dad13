"""The SFU's CPU budget as a known answer: the study's run (rooms of 7 to the knee, the SFU on its
budget on a core of its own, the clients on the others) with the default budget and with twice it.
An SFU whose cost grows with what it forwards should cope with about twice the participants: the
knee at twice the budget is expected at 1.6-2.4x the knee at the default one.

Every participant is synthetic and the bench itself (the engine) runs on the clients' cores: twice
the budget is a whole core, which the SFU gets only with its core to itself, and the generator
only pushes the load that core copes with when no browser shares the clients' core (on a 2-core
VM carrying 1,200 streams per core, two browser pages left the 1-core runs client-bound at 42-56
participants; with neither, Janus's knees came at 35 and 63). The knee rule reads the synthetic
participants' figures as it reads the browsers'.

    .venv/bin/python bench/budget.py [--sfus janus,inhouse,janus-tuned] [--budget CORES] [--repeat R]
                                     [--preset broadcast] [--json FILE]

An SFU named `ADAPTER-PROFILE` (`janus-tuned`) runs that adapter with that profile; `--budget` is
the smaller of the two budgets (default: the one a study of these SFUs sizes on this machine,
sfubench/calibrate.py, measured first where it has not been). A knee moves from run to run (the in-house
SFU's came at 70-98 participants at 0.5 core here), so `--repeat R` runs every SFU at both budgets
R times, in rounds (A B, A B: drift in the machine falls on all). Each round gives a ratio; the
verdict goes by their median, printed with every round's ratio and their spread ((max - min) /
median). The JSON holds `rounds` (by SFU: both runs, the ratio and its verdict) and `summary`.

Where the generator cannot push the load twice the budget needs, the run ends client-bound: the
bench says so, gives the load it did measure (below which the SFU coped: a lower bound of the
ratio), and measures the doubling where the generator can push it: the default run at half the
budget, judged against the one at the budget. That round is then judged by the doubling below, and
the table shows both. A ratio outside the band says how far the steps below the two knees leave it
(each SFU's limit lies within a step below its knee), and the CPU and the cost of a forwarded packet
where each run last coped: the ratio is the one times the inverse of the other, and an SFU that
forwards more cheaply once saturated beats the band from above. Not a test: figures depend on the
machine; printed beside them. Exit codes: 0 ok, 1 a run failed, 2 bad input, 130 interrupted.

`--preset broadcast` runs the broadcast instead (one publisher, viewers added until the knee, on the
meeting's budget, as `make study ARGS="--preset broadcast"` does): its knees, steps and ratio count
viewers, every one synthetic as every participant is here.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

# runnable as a plain script from a checkout, without installing the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports import metrics, runfiles  # noqa: E402
from sfubench import calibrate, config, loadtest  # noqa: E402
from sfubench.sfu import Adapter  # noqa: E402
from sfubench.progress import Progress  # noqa: E402

EXPECTED = (1.6, 2.4)


def knee(name: str, cores: float, out: Path, prefix: str, subnet: str, preset: str | None = None) -> dict:
    """One run of `name` (ADAPTER or ADAPTER-PROFILE) with the budget `cores`, the default scenario's
    or `preset`'s: its knee, or where the clients stopped it, counted in viewers in a broadcast."""
    sfu, _, profile = name.partition("-")
    cfg = config.load(cli={**({"preset": preset} if preset else {}),
                           "sfu": sfu, "sfu_profile": profile or "auto", "sfu_cpus": cores, "out": str(out),
                           "real_rooms": 0, "lab_prefix": prefix, "lab_subnet": subnet, "quality_frames": 0,
                           "results_db": str(out / "results.sqlite"),
                           # twice the budget ramps twice as far: the default run's time bound would cut it
                           "ramp_minutes": 60, **({"max_viewers": 1000} if preset == "broadcast" else {})}, env={})
    print(f"{name}: {preset or 'the study'}'s run, every participant synthetic, with {cores:g} core(s) of SFU",
          flush=True)
    run_dir, status = loadtest.run(cfg, Progress(open(os.devnull, "w")))
    if status != "ok":
        raise RuntimeError(f"{name} at {cores:g} core(s): the run ended {status}; see {run_dir}")
    analysis = metrics.analyse(runfiles.load(run_dir))
    k = analysis.knee
    # what the SFU could use of its budget: given a whole core, SFUs used 0.78-0.96 of it here, so
    # twice a budget may not be twice the CPU
    used = max((r["sfu_cores_fwd"] for r in analysis.cost if r.get("sfu_cores_fwd") is not None), default=None)
    # what a forwarded packet cost where the SFU last coped: the premise of the band is that it stays
    coped = next((r for r in analysis.cost if r["participants"] == k.coped), {})
    # a broadcast's knee is counted in viewers: its publishers are there at every count
    fixed = cfg.publishers_per_room if cfg.shape == "broadcast" else 0
    return {"cores": cores, "knee": k.participants and k.participants - fixed, "criterion": k.criterion,
            "detail": k.detail, "unit": "viewers" if fixed else "participants",
            "step": k.participants - k.coped if k.participants and k.coped else cfg.viewer_step if fixed
            else cfg.users_per_room,
            "sfu_cores_used": used, "us_per_packet_coped": coped.get("sfu_us_per_packet"),
            "sfu_cores_coped": coped.get("sfu_cores_fwd"), "run": str(run_dir)}


def judge(one: dict, two: dict, base: float) -> dict:
    """One round of an SFU: the ratio of its knees at twice and once the budget, and what it says.
    `bound`: the run at twice the budget ended client-bound, so the ratio is a lower bound."""
    bound = two["criterion"] == "client"
    if one["knee"] is None or one["criterion"] == "client":
        return {"ratio": None, "bound": False, "verdict": f"no SFU knee at {base:g} core: {one['detail']}"}
    if two["knee"] is None:
        return {"ratio": None, "bound": False,
                "verdict": f"no knee with {2 * base:g} core(s), as far as the run went: {two['detail']}"}
    ratio = two["knee"] / one["knee"]
    if bound:
        return {"ratio": ratio, "bound": True,
                "verdict": f"the generator could not reach it: client-bound at {two['knee']}, the SFU coping "
                           f"below it, so the ratio is at least {ratio:.2f}x"}
    return {"ratio": ratio, "bound": False, "verdict": in_band(ratio) + resolution(one, two) + efficiency(one, two)}


def efficiency(one: dict, two: dict) -> str:
    """Where a ratio outside the band comes from: the packets an SFU forwards go as the CPU it
    uses over what a packet costs it, so where the cost moved between the knees the ratio is not
    the CPU's. An SFU that forwards more cheaply once saturated (more packets a wakeup) gains more
    than twice the participants from twice the CPU."""
    ratio = two["knee"] / one["knee"]
    a, b = one.get("us_per_packet_coped"), two.get("us_per_packet_coped")
    ca, cb = one.get("sfu_cores_coped"), two.get("sfu_cores_coped")
    if EXPECTED[0] <= ratio <= EXPECTED[1] or not (a and b and ca and cb):
        return ""
    return (f"; where it last coped it used {ca:.2f} then {cb:.2f} core ({cb / ca:.2f}x) at {a:.1f} then "
            f"{b:.1f} µs a forwarded packet ({a / b:.2f}x the packets per CPU-second)")


def resolution(one: dict, two: dict) -> str:
    """Where a ratio outside the band may lie: a knee is the first count that failed, the last
    measured below it (a room below, or less once narrowed down) coped, so each SFU's limit lies
    within that step below its knee."""
    ratio = two["knee"] / one["knee"]
    if not one.get("step") or EXPECTED[0] <= ratio <= EXPECTED[1]:
        return ""
    below_one, below_two = one["step"], two.get("step") or one["step"]
    low = (two["knee"] - below_two) / one["knee"]
    high = f"{two['knee'] / (one['knee'] - below_one):.2f}x" if one["knee"] > below_one else "any higher ratio"
    unit = one.get("unit", "participants")
    return (f" (the steps of {below_one} and {below_two} {unit} below the knees leave it anywhere "
            f"from {low:.2f}x to {high})")


def one_round(sfu: str, base: float, knee_at) -> dict:
    """An SFU's round: its knees at the budget and twice it (`knee_at(sfu, cores)`); where the
    generator could not reach the knee at twice the budget, the doubling below it too (`below`: half
    the budget and the budget), which the round is then judged by."""
    one, two = knee_at(sfu, base), knee_at(sfu, 2 * base)
    res = {"runs": [one, two], **judge(one, two, base)}
    if res["bound"]:
        half = knee_at(sfu, base / 2)
        res["below"] = {"runs": [half, one], **judge(half, one, base / 2)}
    return res


def judged(res: dict) -> dict:
    """The judgement a round goes by: the doubling below the budget where it replaced the one above."""
    below = res.get("below")
    return below if below and below["ratio"] is not None else res


def in_band(ratio: float) -> str:
    return "as expected" if EXPECTED[0] <= ratio <= EXPECTED[1] else "OUTSIDE the expected range"


def summarise(rounds: list[dict]) -> dict:
    """An SFU's rounds (one_round()) as one verdict: the median ratio of the rounds that have one
    (judged()), every round's ratio and their spread; lower bounds (client-bound) leave a median too
    low to fail on."""
    below = sum(judged(r) is not r for r in rounds)
    rounds = [judged(r) for r in rounds]
    known = [r["ratio"] for r in rounds if r["ratio"] is not None]
    if not known:
        return {"ratio": None, "ratio_runs": [None] * len(rounds), "ratio_spread": None, "runs": len(rounds),
                "verdict": "no ratio in any round"}
    mid = statistics.median(known)
    verdict = in_band(mid)
    if any(r["bound"] for r in rounds) and mid < EXPECTED[0]:
        verdict = f"at least {mid:.2f}x: the generator could not reach the knee at twice the budget in every round"
    if below:
        verdict += f" ({below} of {len(rounds)} round(s) judged by the doubling below the budget)"
    return {"ratio": mid, "ratio_runs": [r["ratio"] for r in rounds],
            "ratio_spread": (max(known) - min(known)) / mid, "runs": len(rounds), "verdict": verdict}


def table_row(pair: dict) -> str:
    """A judged pair of runs as the table's cells from its budgets on."""
    cells = [f"{x['knee']}" if x["criterion"] != "client" else f"client-bound at {x['knee']}" for x in pair["runs"]]
    used = " / ".join("-" if x["sfu_cores_used"] is None else f"{x['sfu_cores_used']:.2f}" for x in pair["runs"])
    ratio = "-" if pair["ratio"] is None else f"{pair['ratio']:.2f}x"
    budgets = " → ".join(f"{x['cores']:g}" for x in pair["runs"])
    return f"{budgets} | {' → '.join(cells)} | {ratio} | {used} | {pair['verdict']}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sfus", default="janus,inhouse", help="adapters, in order")
    p.add_argument("--lab-prefix", default="sfubb", help="lab names, so a loadtest can run beside")
    p.add_argument("--lab-subnet", default="127.0.11", help="the lab's /24 inside 127.0.0.0/8")
    p.add_argument("--budget", type=float, help="the smaller budget, in cores (default: the one a study of "
                   "these SFUs sizes here)")
    p.add_argument("--repeat", type=int, default=1, help="rounds: every SFU at both budgets this many times")
    p.add_argument("--preset", help="a scenario's preset instead of the study's default one (broadcast: its "
                   "knees counted in viewers)")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    a = p.parse_args(argv)
    sfus = [s.strip() for s in a.sfus.split(",") if s.strip()]
    if not sfus or (os.cpu_count() or 1) < 2 or a.repeat < 1:
        print("budget: --sfus must name adapters, --repeat >= 1, and the machine needs 2 cores", file=sys.stderr)
        return 2
    try:
        config.load(cli={"preset": a.preset} if a.preset else {}, env={})
    except config.ConfigError as e:
        print(f"budget: {e}", file=sys.stderr)
        return 2
    defaults = config.load(cli={"lab_prefix": a.lab_prefix, "lab_subnet": a.lab_subnet}, env={})
    out = Path(tempfile.mkdtemp(prefix="sfubench-bench-budget-"))
    rounds: list[dict] = []
    try:
        base = a.budget or calibrate.calibrate(defaults, {s.partition("-")[0]: Adapter.load(s.partition("-")[0]).version
                                                          for s in sfus}, out / "calibration", Progress()).cores
        # the engine off the SFU's core (its children take their own cpusets): a whole core is the SFU's
        os.sched_setaffinity(0, config.cpu_list(defaults.client_cpuset))
        for _ in range(a.repeat):
            rounds.append({})
            for sfu in sfus:
                rounds[-1][sfu] = one_round(sfu, base, lambda s, c: knee(s, c, out, a.lab_prefix, a.lab_subnet,
                                                                         a.preset))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (config.ConfigError, RuntimeError, OSError) as e:
        print(f"budget: {e}", file=sys.stderr)
        return 1
    unit = "viewers at the knee" if a.preset == "broadcast" else "the knee"
    print(f"\n{unit[0].upper() + unit[1:]} with twice the SFU's budget (expected {EXPECTED[0]:g}-{EXPECTED[1]:g}x "
          f"{unit} with {base:g} core){f', {a.preset}' if a.preset else ''}, {a.repeat} round(s):")
    print("| SFU | round | budgets (cores) | knees | ratio | most SFU cores used | verdict |")
    print("|---|---|---|---|---|---|---|")
    for i, r in enumerate(rounds, 1):
        for sfu, res in r.items():
            for pair in (res, res.get("below")):
                if pair:
                    print(f"| {sfu} | {i} | {table_row(pair)} |")
    summary = {sfu: summarise([r[sfu] for r in rounds]) for sfu in sfus}
    if a.repeat > 1:
        for sfu, sm in summary.items():
            ratio = "-" if sm["ratio"] is None else f"{sm['ratio']:.2f}x"
            spread = "-" if sm["ratio_spread"] is None else f"{sm['ratio_spread']:.2f}"
            print(f"{sfu}: median ratio {ratio} over {a.repeat} rounds (spread {spread}): {sm['verdict']}")
    if a.json:
        a.json.write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
