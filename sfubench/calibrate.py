"""The SFU's budget sized to this machine: `--sfu-cpus auto` for a ramp to the knee in the local lab
with synthetic participants (a default loadtest, a study's runs).

A fixed budget puts a cheap SFU's knee past what the clients' core carries on one machine and well
within it on another (in-house knees at 0.5 core came at 49 to 175 participants on 2-core VMs of
one kind): there the run ends client-bound and measures the clients. So before its first run a study
(or a default loadtest) measures, each cached per machine, adapter version and scenario:
- what the clients' core carries beside the browser: the participants (and the streams the
  generator receives) at the most participants whose windows kept the clients' headroom (kept())
  and their health. The ramp's SFU is the in-house one on a core of its own,
  unconfined (the cheapest forwarder outlasts the clients), so the same ramp gives its CPU at every
  count up to there;
- what each SFU spends at a light load (LIGHT_ROOMS rooms, unconfined, all synthetic): µs per
  forwarded packet times packets forwarded per participant, its cost per participant.
Then one budget for the whole study: what the cheapest SFU would use at TARGET of what the clients
carry (the in-house SFU's CPU there, scaled by the two SFUs' costs per participant at the light
load), so that the cheapest SFU's knee is expected there and every other SFU's below it, or,
where the clients carry more than the ramp reaches within --ramp-minutes, at REACH of the rooms it
adds in that time: its knee must leave time for the steps that confirm it and narrow it down, and
a study of five SFUs, twice, must fit its 45 minutes. Past its knee an SFU spends all its budget
while the run confirms the knee a room further, beside the clients, the browser and the engine: the
budget is never more than MACHINE of the machine's cores leave it there, everything besides the SFU
spending what it did at that count of the clients' ramp. The
in-house SFU's own curve is read, not its light-load cost extrapolated: an SFU's cost per packet
falls as its load grows (the in-house SFU's by about three times from 6 participants to 70). A
budget under FLOOR_CORES is no fair deployment of any SFU: where the clients' capacity gives it, it
is refused, with the figures that gave it; where only the ramp's minutes do, FLOOR_CORES is used (the
knee then comes later, still within what the clients carry)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from reports import clientbound
from reports.windows import probe_edges

from . import calcache
from .config import ConfigError, cpu_list
from .progress import Progress

# Of the participants the clients carry: the cheapest SFU's expected knee. Under its quota an SFU
# forwards in larger batches than unconfined, so it gives way past its expected knee (the in-house
# SFU at 99 where 88 was expected, here): the target leaves room for that below the clients' limit.
TARGET = 0.55
FLOOR_CORES = 0.15    # a budget below this is no fair deployment: refused
# A window keeps the clients' headroom unless the generator's pacing p99 reached PACING_MS (a quarter
# of the lateness at which a run's window is client-bound, reports/clientbound.py) while their cores
# were BUSY. Lateness alone does not tell: where a core's timer wakes late now and then (a nested VM's
# vCPU woken from a halt), p99 passes any fixed limit now and then with a third of the core idle,
# while a generator short of CPU is late on a full core (docs/performance-history.md: "The
# clients' headroom on a VM whose timers wake late").
PACING_MS = 5.0
BUSY = 0.9
# Of the machine's cores: the most the SFU at its budget and everything besides it may keep busy a
# room past the cheapest SFU's expected knee, under the share at which a run's window is client-bound
# (reports/clientbound.py's machine_cpu). With the SFU on a core of its own the clients keep theirs,
# but the engine and the probes use either: a budget of the SFU's whole core left a costly SFU's run
# client-bound at its own knee (docs/performance-history.md: "A budget the machine carries a step
# past the knee").
MACHINE = 0.9
HEADROOM = f"the generator's pacing p99 under {PACING_MS:g} ms, or over it with the clients' cores under {BUSY:.0%} busy"
LIGHT_ROOMS = 2       # rooms at which the SFUs' costs are compared
# Of the rooms the lab's ramp adds within --ramp-minutes: the furthest the cheapest SFU's knee is
# expected. After its knee's room the ramp takes the step that confirms it, measures that step again
# and narrows the knee down within its room (up to five steps), and the in-house SFU under its quota
# gives way past its expected knee (by up to two fifths in the studies of
# docs/performance-history.md). Each room it adds costs every SFU's runs a step: aimed at half the
# ramp, a default study (five SFUs, twice) took 47 minutes, over its 45.
REACH = 0.35
JOIN_S = 5.0          # a ramp's room joins and validates in this, beside its settling and window
MAX_ROOMS = 60
STEP_ROOMS = 2        # rooms added a step, past the first, while the clients' capacity is sought
SETTLE_S = 2.0
SAMPLES = 4           # per window: 3 s
# The first count follows the browser's start (and, in a study, whatever ran before): windows there
# are measured until one keeps the pacing, up to this many.
FIRST_WINDOWS = 4
REFERENCE = "inhouse"
RULE = (f"one budget for every SFU: what the cheapest SFU would use at {TARGET:.0%} of the participants the "
        f"clients carry beside the browser with headroom ({HEADROOM}; the in-house "
        f"SFU's CPU there, scaled by the SFUs' costs per participant at {LIGHT_ROOMS} rooms), or at {REACH:.0%} "
        f"of the rooms the ramp adds within its minutes where that is fewer, and no more than {MACHINE:.0%} of the "
        "machine's cores leave it a room past there, everything besides it spending what it did in that "
        f"ramp; under {FLOOR_CORES:g} core "
        "refused, or raised to it where only the ramp's minutes ask for less")


class CalibrationFailed(RuntimeError):
    """A calibration run could not measure what it is for (the reason and its run folder)."""


@dataclass(frozen=True)
class Capacity:
    participants: int       # the most participants the clients carried with headroom
    streams: int            # the streams they received there
    pacing_ms_p99: float    # the generator's pacing there
    curve: tuple            # ((participants, the in-house SFU's cores), ...) up to there
    at_least: bool = False  # the ramp stopped there with headroom left: all a budget can use
    busy: float | None = None   # the share of the clients' cores busy there
    # ((participants, the cores the machine kept busy besides the SFU: the clients, the browser, the
    # engine), ...) up to there, and the machine's cores; none: unprobed, no bound of the machine's
    besides: tuple = ()
    cpus: int = 0

    def reference_cores(self, participants: float) -> float:
        """The in-house SFU's CPU at `participants`."""
        return _along(self.curve, participants)

    def reference_participants(self, cores: float) -> float:
        """The participants at which the in-house SFU's CPU reaches `cores`: reference_cores's inverse
        where the curve rises."""
        return _last(lambda p: self.reference_cores(p) < cores, 4.0 * max(p for p, _ in self.curve))

    def spare_cores(self, participants: float) -> float:
        """What MACHINE of the machine's cores leaves the SFU at `participants`, everything besides it
        spending what it did there (inf: unprobed)."""
        return MACHINE * self.cpus - _along(self.besides, participants) if self.besides else float("inf")


def _along(points: tuple, x: float) -> float:
    """A measured curve's value at `x`: between the points measured, along the line between them;
    before the first two or past the last two, along theirs."""
    points = sorted(points)
    if len(points) == 1:
        return points[0][1]
    i = next((i for i in range(1, len(points)) if points[i][0] > x), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 != x0 else y0


def _last(holds, hi: float) -> float:
    """The largest x in [0, hi] at which `holds` (true below some x, false past it) still holds."""
    lo = 0.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    return lo


@dataclass(frozen=True)
class Cost:
    version: str
    us_per_packet: float
    pps_per_participant: float   # packets forwarded a second per participant

    @property
    def per_participant(self) -> float:
        return self.us_per_packet * self.pps_per_participant


@dataclass(frozen=True)
class Budget:
    cores: float
    capacity: Capacity
    costs: dict          # SFU -> Cost, of the SFUs it is for
    cheapest: str
    reference: Cost      # the in-house SFU's, whose curve the capacity holds
    reach: float | None   # the participants the ramp reaches in time (None: no time bound)
    aim: float            # the participants at which the cheapest SFU is expected to give way

    def expected_knee(self, sfu: str) -> float:
        return self.aim * self.costs[self.cheapest].per_participant / self.costs[sfu].per_participant

    def record(self) -> dict:
        """What meta.json and study.json keep of it."""
        return {"cores": self.cores, "rule": RULE, "target": TARGET, "reach": self.reach, "cheapest": self.cheapest,
                "clients": {k: v for k, v in dataclasses.asdict(self.capacity).items() if k not in ("curve", "besides")},
                "costs": {s: {**dataclasses.asdict(c), "expected_knee": round(self.expected_knee(s), 1)}
                          for s, c in self.costs.items()},
                "reference": {"sfu": REFERENCE, **dataclasses.asdict(self.reference)}}


def needed(cfg) -> bool:
    """Whether the run's budget is to be sized here: left at auto, in the local lab, a ramp to the
    knee that synthetic participants carry."""
    return ("sfu_cpus" in cfg.auto and not cfg.sfu_address and cfg.shape == "until-knee"
            and cfg.browser_participants < cfg.participants)


def reach(cfg) -> float | None:
    """The participants at REACH of the rooms the ramp adds within --ramp-minutes (None: unbounded)."""
    if not cfg.ramp_minutes:
        return None
    step_s = JOIN_S + cfg.settle + (cfg.ramp_samples - 1) * cfg.sample_interval
    return REACH * int(cfg.ramp_minutes * 60 / step_s) * cfg.users_per_room


def choose(capacity: Capacity, costs: dict[str, Cost], reference: Cost, sfu_cores: int = 1,
           reached: float | None = None, *, room: int) -> Budget:
    """The budget at which the cheapest SFU of `costs` is expected to give way at TARGET of what the
    clients carry, or at `reached` participants where that is fewer, or where the machine would
    pass MACHINE of its cores a `room` later with the SFU at the budget (`reference`: the in-house
    SFU's cost at the light load, beside the curve); never under FLOOR_CORES."""
    cheapest = min(costs, key=lambda s: costs[s].per_participant)
    scale = costs[cheapest].per_participant / reference.per_participant
    carried = TARGET * capacity.participants

    def fits(p: float) -> bool:   # past its knee the SFU spends all its budget while the run confirms it a room on
        return capacity.reference_cores(p) * scale <= capacity.spare_cores(p + room)

    def used(p: float) -> float:   # the cheapest SFU's CPU at `p`, or what the machine leaves it
        return min(capacity.reference_cores(p) * scale, capacity.spare_cores(p + room))

    limit = carried if fits(carried) else _last(fits, carried)
    aim = min(limit, reached or float("inf"))
    cores = round(min(used(aim), float(sfu_cores)), 2)
    if cores < FLOOR_CORES:
        most = round(used(limit), 2)
        if most < FLOOR_CORES and not capacity.at_least:
            machine = (f", and the machine's {capacity.cpus} cores leave an SFU "
                       f"{capacity.spare_cores(limit + room):.2f} core at {limit + room:.0f}" if limit < carried else "")
            raise ConfigError(
                f"the budget this machine sizes is {most:g} core, under {FLOOR_CORES:g}, which no fair deployment "
                f"would give an SFU: its clients carry {capacity.participants} participants beside the browser{machine}, "
                f"and {cheapest}, the cheapest, would use {most:g} core at {limit:.0f}. "
                "Give --sfu-cpus, or run on a machine with more cores for the clients")
        # only the ramp's minutes asked for less (or the clients' limit, past sought(), was not measured)
        cores = FLOOR_CORES
        aim = min(capacity.reference_participants(FLOOR_CORES / scale), limit)
    return Budget(cores, capacity, costs, cheapest, reference, reached, aim)


# ---------------------------------------------------------------- the measurements

def _scenario(stop_rooms: int | None, enough: float | None = None):
    """A run's scenario (loadtest.run's): rooms added a step (one, then STEP_ROOMS), each validated,
    settled SETTLE_S and measured over SAMPLES; up to `stop_rooms` rooms a room a step, else until
    two windows in a row at one count lack the clients' headroom (one alone may be a passing
    hiccup: a pacing p99 of 6.4 ms once at 105 where the same ramp read 0.25 up to 147; at the
    first count, FIRST_WINDOWS), MAX_ROOMS, or a count of headroom at `enough` participants."""
    def scenario(runner) -> None:
        probed: list[dict] = []   # the probes' rows at the windows' edges: the clients' CPU in each
        runner.bus.subscribe(lambda _, row: probed.append(row), ["server"])
        rooms = 0
        while rooms < (stop_rooms or MAX_ROOMS) and not (enough and rooms * runner.cfg.users_per_room >= enough):
            first = not rooms
            rooms += 1 if stop_rooms or first else STEP_ROOMS
            for room in runner.resize(rooms * runner.cfg.users_per_room):
                runner.validate(room)
            runner.wait(SETTLE_S)
            if stop_rooms is None and not any(_headroom(runner, probed) for _ in range(FIRST_WINDOWS if first else 2)):
                break
            if stop_rooms is not None:
                runner.measure("ramp", SAMPLES)
    return scenario


def _headroom(runner, probed: list[dict]) -> bool:
    """One window: whether it kept the clients' headroom."""
    window = runner.measure("ramp", SAMPLES)
    return kept(window, clientbound.busy_share(probe_edges(probed).get(window.get("window"), {}), "clients"))


def kept(window: dict, busy: float | None) -> bool:
    """Whether a window (a windows.jsonl record) kept the clients' headroom: the generator's pacing
    p99 under PACING_MS, or over it with the clients' cores under BUSY `busy` (the machine's timers
    late, not the generator short of CPU; unprobed, the pacing alone)."""
    return (window.get("pacing_ms_p99") or 0) < PACING_MS or (busy is not None and busy < BUSY)


def _run(cfg, sfu: str, out: Path, stop_rooms: int | None, progress: Progress, enough: float | None = None):
    from reports import metrics, runfiles   # the reports read the calibration's run folders as any
    from . import loadtest                  # loadtest.run calls back here: imported when measuring

    run_cfg = dataclasses.replace(cfg, sfu=sfu, sfu_cpus=0.0, shape="ramp", rooms=stop_rooms or MAX_ROOMS,
                                  real_rooms=cfg.real_rooms if stop_rooms is None else 0, settle=SETTLE_S,
                                  quality_frames=0, background_interval=0, output="", out=str(out))
    run_dir, status = loadtest.run(run_cfg, progress, _scenario(stop_rooms, enough))
    if status != "ok":
        raise CalibrationFailed(f"calibrating on {sfu}: the run ended {status}; see {run_dir}")
    return run_dir, metrics.analyse(runfiles.load(run_dir))


def measure_capacity(cfg, out: Path, progress: Progress) -> Capacity:
    """What the clients' core carries beside the browser, and the in-house SFU's CPU up to there,
    up to the participants a budget can use."""
    run_dir, a = _run(cfg, REFERENCE, out, None, progress, sought(cfg))
    found = capacity(a.run.windows, a.health, a.cost, sought(cfg), a.run.server)
    if found is None:
        raise CalibrationFailed(f"calibrating: the clients carried under two steps with headroom (see {run_dir})")
    return found


def sought(cfg) -> float | None:
    """The participants past which the clients' capacity changes no budget: TARGET of it would
    pass what the ramp reaches in its minutes, so the budget aims at that instead (None: unbounded).
    A capacity ramp that stops there spares a fast machine's first study half its ramp."""
    reached = reach(cfg)
    return reached / TARGET if reached else None


def capacity(windows: list[dict], health: list[dict], cost: list[dict],
             enough: float | None = None, server: list[dict] = ()) -> Capacity | None:
    """From a capacity ramp's windows (windows.jsonl), their health, the SFU's cost rows and the
    probes' rows (server.jsonl): the most participants whose windows, and every count's below, kept
    the clients' headroom (kept()) and health, a count measured twice going by its second window
    (`at_least` where that is the ramp's last count and reaches `enough`); None under two such counts."""
    ramp = {w["participants"]: w for w in windows if w.get("phase") == "ramp"}   # a count's last window
    busy = {h["window"]: h.get("clients_busy") for h in health if h["phase"] == "ramp"}
    bound = {h["participants"]: h["client_bound"] for h in health if h["phase"] == "ramp"}
    rows = {r["participants"]: r for r in cost}
    fine = {p for p, w in ramp.items() if w.get("pacing_ms_p99") is not None and kept(w, busy.get(w.get("window")))
            and not bound.get(p) and p in rows}
    below = sorted(p for p in fine if all(q in fine for q in ramp if q < p))   # nothing worse under it
    if len(below) < 2:
        return None
    top = below[-1]
    at_least = bool(enough) and top >= enough and top == max(ramp)
    edges = probe_edges(server)
    besides = {p: _besides_sfu(edges.get(ramp[p].get("window"), {})) for p in below}
    machine = [r.get("cores") for r in server if r.get("role") == "machine" and r.get("cores")]
    return Capacity(top, rows[top]["fwd_streams"], ramp[top]["pacing_ms_p99"],
                    tuple((p, rows[p]["sfu_cores_fwd"]) for p in below), at_least, busy.get(ramp[top].get("window")),
                    tuple((p, c) for p, c in besides.items() if c is not None), int(machine[-1]) if machine else 0)


def _besides_sfu(edges: dict) -> float | None:
    """The cores the machine kept busy besides the SFU over a window (the probe rows at its edges)."""
    machine, sfu = clientbound.cores_used(edges, "machine"), clientbound.cores_used(edges, "sfu")
    return machine - sfu if machine is not None and sfu is not None else None


def measure_cost(cfg, sfu: str, version: str, out: Path, progress: Progress) -> Cost:
    """What `sfu` spends at LIGHT_ROOMS rooms, unconfined, every participant synthetic."""
    run_dir, a = _run(cfg, sfu, out, LIGHT_ROOMS, progress)
    light = LIGHT_ROOMS * cfg.users_per_room
    row = next((r for r in a.cost if r["participants"] == light), None)
    if row is None or not row.get("sfu_us_per_packet"):
        raise CalibrationFailed(f"calibrating on {sfu}: no cost measured at {light} participants (see {run_dir})")
    return Cost(version, row["sfu_us_per_packet"], row["fwd_pps"] / light)


def cached_capacity(cache: calcache.Cache) -> Capacity | None:
    """The clients' capacity the cache holds for this machine and scenario, unless it was sought
    under another rule of headroom than HEADROOM or without what the machine spent besides the SFU
    (then it is no figure of today's rule)."""
    found = cache.get("clients")
    if (not isinstance(found, dict) or not {"participants", "streams", "pacing_ms_p99", "curve", "besides"} <= set(found)
            or found.get("headroom") != HEADROOM):
        return None
    return Capacity(found["participants"], found["streams"], found["pacing_ms_p99"],
                    tuple(tuple(p) for p in found["curve"]), found.get("at_least", False), found.get("busy"),
                    tuple(tuple(p) for p in found["besides"]), found.get("cpus", 0))


def calibrate(cfg, sfus: dict[str, str], out: Path, progress: Progress) -> Budget:
    """The budget for `sfus` (name -> version) under `cfg`'s scenario, measured where the cache has
    no figure for this machine; the calibration's runs go to `out`."""
    cache = calcache.Cache(cfg.cache_dir(), cfg)
    capacity = cached_capacity(cache)
    if capacity is None:
        progress.say(f"calibrating: what the clients carry here beside the browser ({REFERENCE} on a core of its "
                     f"own, rooms added until the generator's pacing p99 reaches {PACING_MS:g} ms with the clients' "
                     f"cores {BUSY:.0%} busy"
                     + (f" or {sought(cfg):.0f} participants, all a budget can use)" if sought(cfg) else ")"))
        capacity = measure_capacity(cfg, out, progress)
        cache.put("clients", {**dataclasses.asdict(capacity), "headroom": HEADROOM})
    costs = {}
    for sfu in dict.fromkeys([REFERENCE, *sfus]):
        version = sfus.get(sfu) or _version(sfu)
        found = cache.get(f"cost:{sfu}@{version}")
        if not isinstance(found, dict) or not {"version", "us_per_packet", "pps_per_participant"} <= set(found):
            progress.say(f"calibrating: what {sfu} {version} spends at {LIGHT_ROOMS} rooms")
            try:
                found = dataclasses.asdict(measure_cost(cfg, sfu, version, out, progress))
            except _run_errors() as e:
                if sfu == REFERENCE:
                    raise
                # its own runs will say the same, each a row of the study: the budget goes by the others
                progress.say(f"calibrating: {sfu} left out of the budget: {str(e).strip().splitlines()[0]}")
                continue
            cache.put(f"cost:{sfu}@{version}", found)
        costs[sfu] = Cost(found["version"], found["us_per_packet"], found["pps_per_participant"])
    if not set(sfus) & set(costs):
        raise CalibrationFailed(f"calibrating: no SFU of {', '.join(sfus)} could be measured")
    budget = choose(capacity, {s: costs[s] for s in sfus if s in costs}, costs[REFERENCE],
                    len(cpu_list(cfg.sfu_cpuset)) or (os.cpu_count() or 1), reach(cfg), room=cfg.users_per_room)
    carry = f"{'at least ' * capacity.at_least}{capacity.participants}"
    progress.say(f"calibrated: the clients carry {carry} participants ({capacity.streams} streams, "
                 f"pacing p99 {capacity.pacing_ms_p99:.2f} ms{_busy(capacity)}); a budget of {budget.cores:g} core puts "
                 f"{budget.cheapest}'s knee near {budget.expected_knee(budget.cheapest):.0f}")
    return budget


def _busy(capacity: Capacity) -> str:
    return f", their cores {capacity.busy:.0%} busy" if capacity.busy is not None else ""


def _run_errors() -> tuple:
    from .grid import GridError
    from .lab import LabError
    from .runner import ClientFailure
    from .sfuserver import AdapterError
    return (AdapterError, CalibrationFailed, ClientFailure, ConfigError, GridError, LabError)


def _version(sfu: str) -> str:
    from .sfu import Adapter
    return Adapter.load(sfu).version
