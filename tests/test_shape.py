"""Load shapes (sfubench/shapes/): each a file of its own, found by name, its settings in the schema."""
import dataclasses

import pytest

from reports.knee import find_knee
from reports.storm import StormRule
from sfubench import config
from sfubench.shapes import SHAPES, Status, Step
from sfubench.shapes.broadcast import Broadcast
from sfubench.shapes.degrade import Degrade
from sfubench.shapes.join_storm import JoinStorm
from sfubench.shapes.ramp import RoomRamp
from sfubench.shapes.restart import Restart
from sfubench.shapes.steady import Steady
from sfubench.shapes.until_knee import UntilKnee


def run(shape, users_per_room):
    """Runs the shape as the runner does; returns the steps it asked for."""
    status, steps = Status(), []
    while (step := shape.tick(status)) is not None:
        steps.append(step)
        status.participants, status.rooms = step.participants, max(status.rooms, step.participants // users_per_room)
    return steps


def test_room_ramp_adds_one_full_room_per_tick_then_stops():
    assert [s.participants for s in run(RoomRamp(rooms=3, users_per_room=7), 7)] == [7, 14, 21]


def test_room_ramp_resumes_from_where_the_run_is():
    assert RoomRamp(rooms=2, users_per_room=5).tick(Status(participants=5, rooms=1)) == Step(10)
    assert RoomRamp(rooms=2, users_per_room=5).tick(Status(participants=10, rooms=2)) is None


class Knee:
    """The fields of reports.knee.Knee the shape reads."""
    def __init__(self, participants=None, client_bound=False, detail="", coped=None):
        self.participants, self.client_bound, self.detail, self.coped = participants, client_bound, detail, coped
        self.of = "knee"


def ramp_until(shape, knees):
    """Runs the shape, handing it knees[i] after step i; returns the counts it asked for."""
    step = iter(knees)
    shape.knee = lambda: next(step)
    return [s.participants for s in run(shape, shape.users_per_room)]


def test_until_knee_stops_one_step_past_a_confirmed_knee_measured_twice():
    shape = UntilKnee(max_rooms=10, users_per_room=5, knee=None, resolution=5)   # a room: not narrowed
    # the rule fires first on the last count measured (unconfirmed), then keeps it once the next step
    # agrees, and once more when that step is measured again
    loss = Knee(15, detail="loss", coped=10)
    wanted = ramp_until(shape, [Knee(), Knee(), loss, loss, loss])
    assert wanted == [5, 10, 15, 20, 20]
    assert shape.done == "knee at 15 participants: loss"


def test_until_knee_ramps_on_when_the_second_measurement_takes_the_knee_back():
    shape = UntilKnee(max_rooms=10, users_per_room=5, knee=None, resolution=5)
    steps = iter([Knee(), Knee(10, detail="freezes"), Knee(10, detail="freezes"), Knee(),
                  *[Knee(20, detail="rtt", coped=15)] * 3])
    shape.knee = lambda: next(steps)
    wanted = run(shape, 5)
    assert [s.participants for s in wanted] == [5, 10, 15, 15, 20, 25, 25]
    assert wanted[3].reason == "measuring 15 participants again before stopping on the knee at 10"
    assert wanted[2].reason is None
    assert shape.done == "knee at 20 participants: rtt"


def freezing_from(threshold: int, measured: list[int]):
    """The knee rule itself (reports/knee.py) over the counts measured so far, of an SFU whose video
    freezes from `threshold` participants on."""
    return lambda: find_knee([{"participants": c, "freezes_per_min": 5.0 if c >= threshold else 0.0}
                              for c in sorted(set(measured))])


@pytest.mark.parametrize("threshold", [8, 50, 52, 53, 55, 56])
def test_until_knee_narrows_a_confirmed_knee_down_to_two_participants_within_its_room(threshold):
    measured: list[int] = []
    shape = UntilKnee(max_rooms=20, users_per_room=7, knee=freezing_from(threshold, measured))
    status, steps = Status(), []
    while (step := shape.tick(status)) is not None:
        steps.append(step)
        measured.append(step.participants)
        status.participants, status.rooms = step.participants, -(-step.participants // 7)
    knee = freezing_from(threshold, measured)()
    assert knee.participants - knee.coped <= 2 and knee.coped < threshold <= knee.participants, (knee, measured)
    assert shape.done == f"knee at {knee.participants} participants: {knee.detail}"
    room = -(-threshold // 7) * 7   # the room's step that first froze, confirmed by the next room's
    assert measured[:measured.index(room + 7) + 2] == list(range(7, room + 8, 7)) + [room + 7], measured
    narrowing = steps[measured.index(room + 7) + 2:]
    assert narrowing and all(room - 7 < s.participants < room for s in narrowing), measured
    assert narrowing[0].reason.startswith(f"narrowing the knee down: {room - 7} coped, {room} did not"), narrowing
    assert len(narrowing) <= 3


def test_until_knee_narrows_nothing_past_its_ramp_minutes_nor_a_knee_at_the_first_room():
    now = [0.0]

    def clock():
        now[0] += 20.0
        return now[0]
    measured: list[int] = []
    shape = UntilKnee(max_rooms=20, users_per_room=7, knee=freezing_from(30, measured), ramp_minutes=2.5,
                      clock=clock)
    status = Status()
    while (step := shape.tick(status)) is not None:
        measured.append(step.participants)
        status.participants, status.rooms = step.participants, -(-step.participants // 7)
    # 7..42 and 42 again (ticks 0-120 s into the ramp), a narrowing step at 140 s; at 160 s its 150 s are up
    assert measured == [7, 14, 21, 28, 35, 42, 42, 31] and shape.done.startswith("knee at 31"), (measured, shape.done)
    assert shape.done.endswith("(narrowed down to 28-31 when the ramp's minutes were up)"), shape.done
    measured.clear()
    shape = UntilKnee(max_rooms=20, users_per_room=7, knee=freezing_from(3, measured))
    status = Status()
    while (step := shape.tick(status)) is not None:
        measured.append(step.participants)
        status.participants, status.rooms = step.participants, -(-step.participants // 7)
    assert measured == [7, 14, 14] and shape.done.startswith("knee at 7"), measured   # nothing below it coped


def test_until_knee_stops_at_once_when_the_clients_are_the_limit():
    shape = UntilKnee(max_rooms=10, users_per_room=5, knee=None)
    wanted = ramp_until(shape, [Knee(), Knee(10, client_bound=True, detail="clients at 10")])
    assert wanted == [5, 10] and shape.done == "clients at 10"


def test_until_knee_gives_up_at_max_rooms():
    shape = UntilKnee(max_rooms=3, users_per_room=4, knee=None)
    assert ramp_until(shape, [Knee()] * 3) == [4, 8, 12]
    assert shape.done == "no knee up to --max-rooms 3"


def test_until_knee_adds_no_room_after_its_ramp_minutes():
    now = [100.0]

    def clock():
        now[0] += 20.0   # each tick comes a step later
        return now[0]
    shape = UntilKnee(max_rooms=40, users_per_room=7, knee=lambda: Knee(), ramp_minutes=1.0, clock=clock)
    # the ramp's minute counts from its first tick: steps at 0, 20, 40 s; the tick at 60 s ends it
    assert [s.participants for s in run(shape, 7)] == [7, 14, 21]
    assert shape.done == "no knee confirmed within --ramp-minutes 1 (up to 21 participants)"
    # a knee confirmed on the tick that reaches a bound (the minutes, the rooms) is the run's reason,
    # not the bound, and is not measured again: past the bound no ramp is left to go on with
    shape = UntilKnee(max_rooms=40, users_per_room=7, knee=None, ramp_minutes=1.0, clock=clock)
    assert ramp_until(shape, [Knee(), Knee(), Knee(14, detail="loss")]) == [7, 14, 21]
    assert shape.done == "knee at 14 participants: loss"
    shape = UntilKnee(max_rooms=3, users_per_room=7, knee=None)
    assert ramp_until(shape, [Knee(), Knee(), Knee(14, detail="loss")]) == [7, 14, 21]
    assert shape.done == "knee at 14 participants: loss"


def test_degrade_ramps_then_holds_the_load_under_each_profile_and_comes_back():
    shape = Degrade(rooms=2, users_per_room=5, profiles=("3g", "lossy-2pct"))
    assert run(shape, 5) == [Step(5), Step(10), Step(10, "3g", "network"), Step(10, "lossy-2pct", "network")]
    assert shape.done == "2 room(s) measured under 2 network profile(s)"


def test_steady_joins_its_rooms_then_holds_them_for_its_minutes():
    now = [0.0]

    def clock():
        now[0] += 20.0   # each tick comes a measured window later
        return now[0]
    shape = Steady(rooms=2, users_per_room=7, minutes=1.0, clock=clock)
    steps = run(shape, 7)
    assert steps[:2] == [Step(7), Step(14)] and set(steps[2:]) == {Step(14)}
    assert 2 <= len(steps[2:]) <= 3 and shape.done == "14 participants held for 1 min"


def test_shapes_are_found_by_name_and_own_their_settings():
    assert set(SHAPES) == {"ramp", "until-knee", "degrade", "steady", "broadcast", "join-storm", "restart"}
    assert all(SHAPES[name].name == name for name in SHAPES)
    # a shape's settings are settings like any other: flag, environment, file, docs
    cfg = config.load(cli={"shape": "steady", "steady_minutes": "2.5", "rooms": "3"}, env={})
    assert cfg.steady_minutes == 2.5 and cfg.rooms_cap == 3
    assert config.load(cli={}, env={"SFUBENCH_SHAPE": "steady", "SFUBENCH_STEADY_MINUTES": "4"}).steady_minutes == 4.0
    assert config.load(cli={"shape": "until-knee", "max_rooms": "9"}, env={}).rooms_cap == 9
    assert "`--steady-minutes`" in config.markdown() and dataclasses.is_dataclass(cfg)
    with pytest.raises(config.ConfigError, match="--steady-minutes must be"):
        config.load(cli={"shape": "steady", "steady_minutes": "0"}, env={})


def test_rooms_given_to_the_until_knee_shape_are_its_most_rooms_not_ignored():
    assert config.load(cli={"rooms": "2"}, env={}).max_rooms == 2
    assert config.load(cli={"rooms": "2", "max_rooms": "1"}, env={}).max_rooms == 1
    assert config.load(cli={}, env={"SFUBENCH_ROOMS": "3"}).max_rooms == 3
    assert config.load(cli={}, env={}).max_rooms == 40   # not given: the shape's own bound
    assert config.load(cli={"rooms": "2", "shape": "ramp"}, env={}).max_rooms == 40


@pytest.mark.parametrize("given, message", [
    ({"shape": "ramp", "max_rooms": "3"}, "--max-rooms is the until-knee shape's setting; --shape ramp does not use it"),
    ({"degrade": "lan"}, "--degrade is the degrade shape's setting; --shape until-knee does not use it"),
    ({"shape": "steady", "knee_resolution": "3"}, "--knee-resolution is the broadcast and until-knee shapes' setting"),
    ({"shape": "ramp", "ramp_minutes": "5"}, "--ramp-minutes is the broadcast, join-storm and until-knee shapes' setting; --shape ramp"),
    ({"shape": "until-knee", "viewer_step": "5"}, "--viewer-step is the broadcast shape's setting; --shape until-knee"),
])
def test_a_setting_of_another_shape_is_refused_not_ignored(given, message):
    # at its default it changes nothing: a study hands every setting on to each run
    assert config.load(cli={"shape": "ramp", "max_rooms": "40", "degrade": ""}, env={}).shape == "ramp"
    with pytest.raises(config.ConfigError, match=message):
        config.load(cli=given, env={})
    if "shape" not in given:
        return
    with pytest.raises(config.ConfigError, match=message.split(";")[0]):   # from the environment too
        config.load(cli={"shape": given["shape"]}, env={config.env_of(k): v for k, v in given.items() if k != "shape"})


def test_a_presets_rooms_do_not_bound_the_until_knee_shape():
    # the browsers preset's one room is its own ramp's: a run that asks for until-knee keeps its bound
    assert config.load(cli={"preset": "browsers", "shape": "until-knee", "max_rooms": "8"}, env={}).max_rooms == 8


def test_broadcast_adds_viewers_in_steps_that_grow_then_narrows_the_knee_down():
    """One publisher; 8 viewers a step, then a quarter of those watching: a knee from 60 viewers on
    is bracketed by the step that reached it, confirmed by the next measured twice, and narrowed
    down to the participant, each narrowing step below the count the run is at approached from
    half the viewers that coped (where the overload of the confirming steps has drained), as the
    ramp reached it."""
    measured: list[int] = []
    shape = Broadcast(1, 501, knee=freezing_from(61, measured), publishers=1, viewer_step=8, max_viewers=500)
    steps = list(run_recording(shape, measured))
    assert all(step.participants <= 501 for step in steps)
    assert measured == [9, 17, 25, 33, 41, 51, 63, 78, 78, 57, 60, 61], measured
    recoveries = [(i, s) for i, s in enumerate(steps) if s.phase == "recover"]
    # 78 -> 57 is down: recovered at 1 + 50 // 2 first; 57 -> 60 -> 61 are up
    assert [(steps[i - 1].participants, s.participants, steps[i + 1].participants) for i, s in recoveries] == \
        [(78, 26, 57)], steps
    assert recoveries[0][1].within > 0 and recoveries[0][1].reason.startswith("back to 26 participants"), recoveries
    knee = freezing_from(61, measured)()
    assert (knee.coped, knee.participants) == (60, 61), knee
    assert shape.done.startswith(f"knee at {knee.participants} participants")


def test_broadcast_narrows_no_further_where_a_recovery_would_outlast_the_ramps_minutes():
    """The ramp's minutes would end while the run is held down: the run stops where it is (its target
    measured at the step it reached, not at the count it recovers at), the knee narrowed as far as
    it got, and says so."""
    measured: list[int] = []
    now = [0.0]
    shape = Broadcast(1, 501, knee=freezing_from(61, measured), ramp_minutes=2.0, clock=lambda: now[0],
                      publishers=1, viewer_step=8, max_viewers=500)
    steps = []
    for step in run_recording(shape, measured):
        steps.append(step)
        now[0] += 7.0   # 9, ..., 78 and 78 again by 63 s: a recovery's 60 s would pass the 120
    assert [s.phase for s in steps] == ["ramp"] * len(steps) and measured[-1] == 78, steps
    assert shape.done.endswith("(narrowed down to 51-63 when the ramp's minutes were up)"), shape.done


def test_broadcast_stops_at_max_viewers_and_holds_one_room():
    shape = Broadcast(1, 21, knee=lambda: Knee(), publishers=1, viewer_step=8, max_viewers=20)
    assert [s.participants for s in run(shape, 21)] == [9, 17, 21]
    assert shape.done == "no knee up to --max-viewers 20"
    cfg = config.load(cli={"preset": "broadcast", "max_viewers": "40"}, env={})
    assert (cfg.rooms_cap, cfg.users_per_room, cfg.publishers_per_room) == (1, 41, 1)
    assert cfg.publishes("r1u1") and not cfg.publishes("r1u2")
    with pytest.raises(config.ConfigError, match=r"^--rooms: the broadcast shape holds one room"):
        config.load(cli={"preset": "broadcast", "rooms": "3"}, env={})


def run_recording(shape, measured):
    """Runs a one-room shape as the runner does, `measured` the counts of the steps measured so far."""
    status = Status()
    while (step := shape.tick(status)) is not None:
        if step.phase != "recover":   # held, not measured
            measured.append(step.participants)
        status.participants, status.rooms = step.participants, 1
        yield step


def slow_from(size: int, measured: list[int], background: int = 14):
    """The storm knee's rule (reports/storm.py) over the storms measured so far, of an SFU whose
    newcomers take 4 s to a first frame from storms of `size` on."""
    return lambda: find_knee([{"participants": c, "first_frame_p95_s": 4.0 if c - background >= size else 0.8,
                               "joins_failed": 0} for c in sorted(set(measured)) if c > background], StormRule())


def test_join_storm_doubles_its_storms_on_one_background_until_the_storm_knee_is_confirmed():
    measured: list[int] = []
    shape = JoinStorm(background=14, first=14, most=448, within=10.0, knee=slow_from(56, measured))
    steps = list(run_recording(shape, measured))
    assert [s.participants for s in steps] == [14, 28, 42, 70, 126]
    assert steps[0] == Step(14) and {(s.phase, s.fresh_from, s.within) for s in steps[1:]} == {("storm", 14, 10.0)}
    assert shape.done.startswith("storm knee at 70 participants: the storm's 95th-percentile time to a first "
                                 "frame, 4.00 s, is above 3 s"), shape.done


def test_join_storm_stops_at_max_storm_or_where_the_clients_are_the_limit():
    shape = JoinStorm(background=7, first=14, most=40, within=10.0, knee=lambda: Knee())
    assert [s.participants for s in run(shape, 7)] == [7, 21, 35, 47]
    assert shape.done == "no storm knee up to --max-storm 40"
    shape = JoinStorm(background=7, first=14, most=40, within=10.0,
                      knee=lambda: Knee(35, client_bound=True, detail="client-bound at 35 participants"))
    assert [s.participants for s in run(shape, 7)] == [7] and shape.done == "client-bound at 35 participants"
    cfg = config.load(cli={"preset": "join-storm", "max_storm": "28"}, env={})
    assert (cfg.rooms_cap, cfg.real_rooms, cfg.first_storm) == (6, 1, 14)
    assert cfg.real(1, 1) and not cfg.real(3, 1)


def test_restart_joins_its_rooms_restarts_the_sfu_once_then_stops():
    shape = Restart(rooms=3, users_per_room=7, reconnect=False, recovery_timeout=45.0)
    assert run(shape, 7) == [Step(21), Step(21, phase="restart", within=45.0, rejoin=False)]
    assert shape.done == "the SFU was restarted once"
    cfg = config.load(cli={"preset": "restart"}, env={})
    assert (cfg.shape, cfg.rooms, cfg.reconnect, cfg.recovery_timeout) == ("restart", 3, True, 60.0)
    with pytest.raises(config.ConfigError, match=r"^--shape restart: a remote run's SFU is started by its host"):
        config.load(cli={"preset": "restart", "sfu_address": "10.0.0.5", "grid_url": "http://g:4444"}, env={})


def test_restarts_network_variant_cuts_the_link_for_its_seconds_under_the_emulators_partition():
    cfg = config.load(cli={"preset": "restart", "outage": "link", "outage_seconds": "35"}, env={})
    shape = Restart.from_config(cfg, None)
    assert run(shape, 7) == [Step(21), Step(21, phase="restart", within=60.0, rejoin=True, network="partition",
                                         cut_s=35.0)]
    assert shape.done == "the clients' link was cut once" and Restart.networks(cfg) == ("partition",)
    assert Restart.networks(config.load(cli={"preset": "restart"}, env={})) == ()
    with pytest.raises(config.ConfigError, match="--outage"):
        config.load(cli={"preset": "restart", "outage": "router"}, env={})


def test_viewers_are_refused_in_one_line_where_the_adapter_takes_none():
    from sfubench import loadtest
    from sfubench.sfu import Adapter
    cfg = config.load(cli={"sfu": "jitsi", "preset": "broadcast"}, env={})
    with pytest.raises(config.ConfigError, match=r"--publishers-per-room 1: jitsi.s page and driver join as "
                                                 r"publishers only \(`sfubench list-sfus` says which take viewers\)"):
        loadtest._refuse(cfg, Adapter.load("jitsi"))
    loadtest._refuse(config.load(cli={"sfu": "janus", "preset": "broadcast"}, env={}), Adapter.load("janus"))


def test_until_knee_narrowing_leaves_a_count_whose_clients_were_strained_unjudged():
    """A narrowing step measured after the ramp's higher counts, whose clients were strained there
    once: the knee stays the one the counts around it show, narrowed no further than they allow."""
    measured: list[int] = []

    def knee():
        return find_knee([{"participants": c, "freezes_per_min": 5.0 if c >= 38 else 0.0,
                           "client_bound": c == 36, "headroom": c != 36} for c in sorted(set(measured))])
    shape = UntilKnee(max_rooms=20, users_per_room=7, knee=knee)
    status = Status()
    while (step := shape.tick(status)) is not None:
        measured.append(step.participants)
        status.participants, status.rooms = step.participants, -(-step.participants // 7)
    assert measured == [7, 14, 21, 28, 35, 42, 49, 49, 38, 36], measured
    assert shape.done == "knee at 38 participants: 5.00 freezes per stream-minute, above 1 (narrowed down to " \
                         "35-38: the clients were strained at 36)", shape.done
