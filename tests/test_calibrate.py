"""The SFU budget sized to the machine (sfubench/calibrate.py): the rule on given figures, which runs
it applies to, the refusal of a budget no fair deployment would use, and the cache per machine,
adapter version and scenario. (The measurements are runs like any: tests/test_study.py's default
study sizes its budget for real.)"""
import dataclasses

import pytest

from reports import scenario
from sfubench import calcache, calibrate, config, events
from sfubench.calibrate import Capacity, Cost, choose
from sfubench.config import ConfigError


P = calibrate.PACING_MS   # the pacing p99 at which the clients' headroom may end: windows over it are P times something
FULL, IDLE = 1.0, calibrate.BUSY / 2   # the clients' cores busy: over BUSY, and well under it
ROOM = 7   # the rooms' size: the curves' counts go up by rooms of it
CURVE = ((7, 0.06), (21, 0.18), (35, 0.27), (49, 0.36), (63, 0.45), (77, 0.54), (91, 0.6))


def test_the_budget_is_what_the_cheapest_sfu_would_use_at_its_share_of_what_the_clients_carry():
    capacity = Capacity(participants=91, streams=546, pacing_ms_p99=0.4, curve=CURVE)
    reference = Cost("0.1.0", 20.0, 400.0)    # at the light load, dearer a packet than on the curve's top
    costs = {"janus": Cost("1.1.2", 60.0, 400.0), "inhouse": reference}
    budget = choose(capacity, costs, reference, room=ROOM)
    target = calibrate.TARGET * 91
    assert 49 < target < 63   # the in-house SFU's own CPU there, on the line between 49 and 63
    assert budget.cheapest == "inhouse" and budget.cores == round(0.36 + 0.09 * (target - 49) / 14, 2)
    assert budget.expected_knee("inhouse") == pytest.approx(target)
    assert budget.expected_knee("janus") == pytest.approx(target / 3)
    # an SFU cheaper than the reference at the light load: its share of the reference's CPU
    cheaper = choose(capacity, {"x": Cost("1", 10.0, 400.0)}, reference, room=ROOM)
    assert cheaper.cheapest == "x" and cheaper.cores == round(capacity.reference_cores(target) / 2, 2)
    record = budget.record()
    assert record["cores"] == budget.cores and record["clients"]["participants"] == 91 and "curve" not in record["clients"]
    assert record["rule"] == calibrate.RULE and record["costs"]["janus"]["expected_knee"] == round(target / 3, 1)
    # never more than the CPUs the SFU is pinned to
    assert choose(Capacity(5000, 30000, 0.5, CURVE), costs, reference, sfu_cores=1, room=ROOM).cores == 1.0
    # between the counts measured, along the line between them; past the last, along the last two
    assert capacity.reference_cores(14) == pytest.approx(0.12) and capacity.reference_cores(105) == pytest.approx(0.66)


def test_the_budget_leaves_the_machine_what_everything_besides_the_sfu_spends_a_room_past_the_knee():
    reference = Cost("0.1.0", 20.0, 400.0)
    costs = {"janus": Cost("1.1.2", 60.0, 400.0)}   # three times the in-house SFU's cost
    besides = ((7, 0.65), (21, 0.75), (35, 0.9), (49, 1.0), (63, 1.0), (77, 1.05), (91, 1.1))
    capacity = Capacity(91, 546, 0.4, CURVE, besides=besides, cpus=2)
    budget = choose(capacity, costs, reference, room=ROOM)
    # unbounded by the machine, Janus would get over a core at 50; the machine leaves it what
    # everything besides it spends a room past its knee leaves of MACHINE of its cores
    unbounded = choose(dataclasses.replace(capacity, besides=()), costs, reference, room=ROOM)
    assert unbounded.aim == calibrate.TARGET * 91 and budget.aim < unbounded.aim
    assert budget.cores == pytest.approx(calibrate.MACHINE * 2 - _along_besides(besides, budget.aim + 7), abs=0.01)
    assert budget.expected_knee("janus") == pytest.approx(budget.aim)
    # a machine that leaves the SFU room: the clients' share decides, as before
    roomy = dataclasses.replace(capacity, cpus=4)
    assert choose(roomy, costs, reference, room=ROOM).aim == calibrate.TARGET * 91
    # one that leaves a fair deployment nothing: refused, saying so
    with pytest.raises(ConfigError, match=r"the machine's 2 cores leave an SFU .* core at"):
        choose(dataclasses.replace(capacity, besides=((7, 1.7), (91, 1.8))), costs, reference, room=ROOM)


def _along_besides(besides, participants):
    (x0, y0), (x1, y1) = next((a, b) for a, b in zip(besides, besides[1:]) if a[0] <= participants <= b[0])
    return y0 + (y1 - y0) * (participants - x0) / (x1 - x0)


def test_where_the_clients_carry_more_than_the_ramp_reaches_the_knee_is_expected_within_its_minutes():
    cfg = config.load(cli={}, env={})   # the lab's bound, each room settled and measured
    step_s = calibrate.JOIN_S + cfg.settle + (cfg.ramp_samples - 1) * cfg.sample_interval
    rooms = int(cfg.ramp_minutes * 60 / step_s)
    reached = calibrate.reach(cfg)
    assert reached == calibrate.REACH * rooms * 7 and reached / 7 + 5 < rooms   # the knee's five steps fit
    assert calibrate.reach(dataclasses.replace(cfg, ramp_minutes=0.0)) is None   # no bound: the clients'
    reference = Cost("0.1.0", 20.0, 400.0)
    capacity = Capacity(participants=315, streams=3780, pacing_ms_p99=0.25, curve=CURVE)
    bounded = choose(capacity, {"inhouse": reference}, reference, reached=reached, room=ROOM)
    assert calibrate.TARGET * 315 > reached and bounded.expected_knee("inhouse") == pytest.approx(reached)
    assert bounded.cores == round(capacity.reference_cores(reached), 2) and bounded.record()["reach"] == reached
    assert choose(capacity, {"inhouse": reference}, reference, room=ROOM).aim == calibrate.TARGET * 315
    assert choose(capacity, {"inhouse": reference}, reference, reached=1000, room=ROOM).aim == calibrate.TARGET * 315


def test_a_budget_only_the_ramps_minutes_bring_under_the_floor_is_raised_to_it():
    reference = Cost("0.1.0", 20.0, 400.0)
    capacity = Capacity(participants=91, streams=546, pacing_ms_p99=0.4, curve=CURVE)
    assert round(capacity.reference_cores(14), 2) < calibrate.FLOOR_CORES < capacity.reference_cores(calibrate.TARGET * 91)
    raised = choose(capacity, {"inhouse": reference}, reference, reached=14, room=ROOM)
    assert raised.cores == calibrate.FLOOR_CORES
    # its knee expected where the in-house SFU's own curve reaches the floor: 0.15 core at 17.5
    assert raised.expected_knee("inhouse") == pytest.approx(7 + 14 * (0.15 - 0.06) / 0.12)
    assert capacity.reference_participants(0.45) == pytest.approx(63)


def test_a_budget_no_fair_deployment_would_use_is_refused_with_the_figures_that_gave_it():
    target = calibrate.TARGET * 21
    cores = round(0.06 + 0.12 * (target - 7) / 14, 2)
    assert cores < calibrate.FLOOR_CORES
    with pytest.raises(ConfigError, match=rf"is {cores:g} core, under 0\.15.*carry 21 participants.*janus, the "
                                          rf"cheapest, would use {cores:g} core at {target:.0f}.*--sfu-cpus"):
        choose(Capacity(21, 126, 0.3, CURVE), {"janus": Cost("1.1.2", 20.0, 400.0)}, Cost("0.1.0", 20.0, 400.0), room=ROOM)


def test_only_a_default_ramp_to_the_knee_with_synthetic_participants_is_sized():
    assert calibrate.needed(config.load(cli={}, env={}))
    assert not calibrate.needed(config.load(cli={"sfu_cpus": "0.5"}, env={}))           # given
    assert not calibrate.needed(config.load(cli={"preset": "browsers"}, env={}))       # no synthetic ones
    assert not calibrate.needed(config.load(cli={"shape": "ramp"}, env={}))            # no knee sought
    cfg = config.load(cli={}, env={})
    assert not calibrate.needed(dataclasses.replace(cfg, sfu_cpus=0.3))               # sized already


def test_figures_are_kept_per_machine_and_scenario(tmp_path):
    cfg = config.load(cli={"cache": str(tmp_path)}, env={})
    cache = calcache.Cache(tmp_path, cfg)
    assert cache.get("clients") is None
    cache.put("clients", {"participants": 90, "streams": 540, "pacing_ms_p99": 0.3, "curve": CURVE})
    assert calcache.Cache(tmp_path, cfg).get("clients")["participants"] == 90
    # the budget itself is not the scenario's to key on; rooms of another size are
    assert calcache.Cache(tmp_path, dataclasses.replace(cfg, sfu_cpus=0.3)).get("clients")["participants"] == 90
    # nor another shape's settings (a shape added since must not cost a calibration)
    assert calcache.Cache(tmp_path, dataclasses.replace(cfg, first_storm=28)).get("clients")["participants"] == 90
    assert calcache.Cache(tmp_path, config.load(cli={"cache": str(tmp_path), "users_per_room": 5}, env={})
                           ).get("clients") is None
    other = calcache.Cache(tmp_path, cfg)
    other.machine = "another machine"
    assert other.get("clients") is None


def test_a_capacity_sought_under_another_rule_of_headroom_or_without_the_machine_is_sought_again(tmp_path):
    cache = calcache.Cache(tmp_path, config.load(cli={"cache": str(tmp_path)}, env={}))
    found = {"participants": 21, "streams": 252, "pacing_ms_p99": 0.4, "curve": CURVE}
    cache.put("clients", found)   # as one measured before the rule was recorded beside it
    assert calibrate.cached_capacity(cache) is None
    cache.put("clients", {**found, "pacing_limit_ms": calibrate.PACING_MS})   # as the rule of pacing alone was
    assert calibrate.cached_capacity(cache) is None
    cache.put("clients", {**found, "busy": 0.8, "headroom": calibrate.HEADROOM})   # as before the machine counted
    assert calibrate.cached_capacity(cache) is None
    besides = [[7, 0.6], [21, 0.8]]   # as JSON holds them
    cache.put("clients", {**found, "busy": 0.8, "headroom": calibrate.HEADROOM, "besides": besides, "cpus": 2})
    assert calibrate.cached_capacity(cache) == calibrate.Capacity(21, 252, 0.4, CURVE, busy=0.8,
                                                                  besides=((7, 0.6), (21, 0.8)), cpus=2)


def ramp(*windows, bound=()):
    """A capacity ramp's windows, health and cost rows: (participants, pacing p99 ms[, the clients'
    cores busy]) per window."""
    windows = [(n, *w, None)[:4] for n, w in enumerate(windows, 1)]
    records = [{"phase": "ramp", "window": n, "participants": p, "pacing_ms_p99": ms} for n, p, ms, _ in windows]
    health = [{"phase": "ramp", "window": n, "participants": p, "client_bound": p in bound, "clients_busy": busy}
              for n, p, _, busy in windows]
    cost = [{"participants": p, "fwd_streams": 6 * p, "sfu_cores_fwd": p / 300} for _, p, _, _ in windows]
    return records, health, cost


def test_what_the_clients_carry_is_the_last_count_of_a_run_of_headroom():
    found = calibrate.capacity(*ramp((7, 0.2), (21, 0.3), (35, 0.3), (49, 1.4 * P), (49, 1.6 * P)))
    assert (found.participants, found.streams, found.pacing_ms_p99) == (35, 210, 0.3)
    assert found.curve == ((7, 7 / 300), (21, 21 / 300), (35, 35 / 300))
    # one window past the pacing, then its count measured again within it: a passing hiccup
    assert calibrate.capacity(*ramp((7, 0.2), (21, 6.4 * P), (21, 0.3), (35, 0.3), (49, 2 * P), (49, 2 * P))).participants == 35
    # a client-bound window ends it as the pacing does; under two counts of headroom, nothing
    assert calibrate.capacity(*ramp((7, 0.2), (21, 0.2), (35, 0.2), bound={35})).participants == 21
    assert calibrate.capacity(*ramp((7, 0.2), (21, 3 * P), (21, 3 * P))) is None


def test_the_capacity_keeps_what_the_machine_spent_besides_the_sfu_at_each_count():
    windows, health, cost = ramp((7, 0.2), (21, 0.3), (35, 0.3), (49, 2 * P), (49, 2 * P))
    server = []   # the probes' rows at each window's edges, 3 s apart: the machine's CPU and the SFU's
    for window, machine, sfu in ((1, 0.8, 0.1), (2, 1.1, 0.2), (3, 1.4, 0.3), (4, 1.9, 0.4), (5, 1.9, 0.4)):
        for edge, t in (("start", 0), ("end", 3000)):
            server += [{"t": t, "role": role, "cpu_s": cores * t / 1000, "cores": n, "edge": edge,
                        "window": window, "phase": "ramp"} for role, cores, n in (("machine", machine, 2), ("sfu", sfu, 1))]
    found = calibrate.capacity(windows, health, cost, server=server)
    assert found.participants == 35 and found.cpus == 2
    assert [p for p, _ in found.besides] == [7, 21, 35]
    assert [c for _, c in found.besides] == pytest.approx([0.7, 0.9, 1.1])
    assert found.spare_cores(28) == pytest.approx(calibrate.MACHINE * 2 - 1.0)
    # unprobed: no bound of the machine's
    assert calibrate.capacity(windows, health, cost).spare_cores(28) == float("inf")


def test_a_late_generator_ends_the_clients_headroom_only_where_their_cores_were_busy():
    # late with a core half idle: the machine's timers, not the clients' want of CPU
    found = calibrate.capacity(*ramp((7, 0.2, 0.5), (21, 1.2 * P, IDLE), (35, 0.3, 0.7), (49, 1.4 * P, 0.8),
                                     (63, 1.5 * P, FULL), (63, 2 * P, FULL)))
    assert (found.participants, found.pacing_ms_p99, found.busy) == (49, 1.4 * P, 0.8)
    # busy but on time: headroom still
    assert calibrate.capacity(*ramp((7, 0.2, 0.5), (21, 0.3, FULL), (35, 0.3, FULL))).participants == 35
    assert calibrate.kept({"pacing_ms_p99": 2 * P}, IDLE) and not calibrate.kept({"pacing_ms_p99": 2 * P}, FULL)
    assert not calibrate.kept({"pacing_ms_p99": 2 * P}, None) and calibrate.kept({"pacing_ms_p99": None}, FULL)


class ScriptedRunner:
    """The runner a calibration scenario drives, its windows' pacing p99 given in advance, and the
    clients' CPU its probes read at each window's edges (a core, 3 s apart: FULL unless given)."""
    def __init__(self, pacing, busy=()):
        self.cfg, self.pacing, self.busy, self.windows = config.load(cli={}, env={}), list(pacing), list(busy), []
        self.bus = events.Bus()

    def resize(self, participants):
        self.participants = participants
        return []

    def wait(self, seconds):
        pass

    def measure(self, phase, samples):
        window, busy = len(self.windows) + 1, self.busy.pop(0) if self.busy else FULL
        for edge, t, cpu_s in (("start", 0, 0.0), ("end", 3000, 3 * busy)):
            self.bus.emit("server", {"t": t, "role": "clients", "cpu_s": cpu_s, "cores": 1, "edge": edge,
                                     "window": window, "phase": phase})
        self.windows.append((self.participants, self.pacing.pop(0)))
        return {"window": window, "pacing_ms_p99": self.windows[-1][1]}


def test_the_capacity_ramp_waits_out_the_browsers_start_at_its_first_count_and_no_later():
    # the first count: measured until a window keeps the pacing, up to FIRST_WINDOWS
    runner = ScriptedRunner([1.3 * P, 2.8 * P, 0.4, 0.3, 0.3, 1.5 * P, 2 * P])
    calibrate._scenario(None)(runner)
    assert runner.windows == [(7, 1.3 * P), (7, 2.8 * P), (7, 0.4), (21, 0.3), (35, 0.3), (49, 1.5 * P), (49, 2 * P)]
    assert calibrate.capacity(*ramp(*runner.windows)).participants == 35
    runner = ScriptedRunner([1.3 * P] * calibrate.FIRST_WINDOWS)
    calibrate._scenario(None)(runner)
    assert runner.windows == [(7, 1.3 * P)] * calibrate.FIRST_WINDOWS
    # late with the clients' core half idle: the ramp goes on (the cores the probes read decide)
    runner = ScriptedRunner([0.3, 1.5 * P, 2 * P, 0.3, 2 * P, 2 * P], busy=[0.5, IDLE, IDLE, 0.8, FULL, FULL])
    calibrate._scenario(None)(runner)
    assert [p for p, _ in runner.windows] == [7, 21, 35, 49, 63, 63]


def test_the_capacity_ramp_stops_once_the_budget_could_use_no_more():
    cfg = config.load(cli={}, env={})
    sought = calibrate.sought(cfg)
    assert sought == calibrate.reach(cfg) / calibrate.TARGET and calibrate.sought(
        dataclasses.replace(cfg, ramp_minutes=0.0)) is None
    runner = ScriptedRunner([0.3] * 40)
    calibrate._scenario(None, sought)(runner)
    counts = [p for p, _ in runner.windows]
    assert counts[-1] >= sought > counts[-2] and len(counts) == len(set(counts))
    found = calibrate.capacity(*ramp(*runner.windows), sought)
    assert found.participants == counts[-1] and found.at_least
    # headroom ended at the last count: the clients' limit was found, not a lower bound
    assert not calibrate.capacity(*ramp(*runner.windows[:-1], (counts[-1] + 14, 2 * P)), sought).at_least
    # a lower bound refuses no budget: the floor, as where only the ramp's minutes ask for less
    light = Cost("1", 1.0, 10.0)
    lower = Capacity(70, 840, 0.3, ((7, 0.01), (70, 0.05)), at_least=True)
    assert choose(lower, {"inhouse": light}, light, reached=30, room=ROOM).cores == calibrate.FLOOR_CORES
    with pytest.raises(ConfigError):
        choose(dataclasses.replace(lower, at_least=False), {"inhouse": light}, light, reached=30, room=ROOM)
    assert "at least 70 participants" in scenario.sized(choose(lower, {"inhouse": light}, light, reached=30, room=ROOM).record())
