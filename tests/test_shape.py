from sfubench.shape import SHAPES, Degrade, RoomRamp, Status, UntilKnee


def test_room_ramp_adds_one_full_room_per_tick_then_stops():
    shape, status, wanted = RoomRamp(rooms=3, users_per_room=7), Status(), []
    while (n := shape.tick(status)) is not None:
        wanted.append(n)
        status.participants, status.rooms = n, status.rooms + 1
    assert wanted == [7, 14, 21]


def test_room_ramp_resumes_from_where_the_run_is():
    assert RoomRamp(rooms=2, users_per_room=5).tick(Status(participants=5, rooms=1)) == 10
    assert RoomRamp(rooms=2, users_per_room=5).tick(Status(participants=10, rooms=2)) is None


class Knee:
    """The fields of reports.knee.Knee the shape reads."""
    def __init__(self, participants=None, client_bound=False, detail=""):
        self.participants, self.client_bound, self.detail = participants, client_bound, detail


def ramp_until(shape, knees):
    """Runs the shape, handing it knees[i] after step i; returns the counts it asked for."""
    status, wanted, step = Status(), [], iter(knees)
    shape.knee = lambda: next(step)
    while (n := shape.tick(status)) is not None:
        wanted.append(n)
        status.participants, status.rooms = n, status.rooms + 1
    return wanted


def test_until_knee_stops_one_step_past_a_confirmed_knee():
    shape = UntilKnee(max_rooms=10, users_per_room=5, knee=None)
    # the rule fires first on the last count measured (unconfirmed), then keeps it once the next step agrees
    wanted = ramp_until(shape, [Knee(), Knee(), Knee(15, detail="loss"), Knee(15, detail="loss")])
    assert wanted == [5, 10, 15, 20]
    assert shape.done == "knee at 15 participants: loss"


def test_until_knee_stops_at_once_when_the_clients_are_the_limit():
    shape = UntilKnee(max_rooms=10, users_per_room=5, knee=None)
    wanted = ramp_until(shape, [Knee(), Knee(10, client_bound=True, detail="clients at 10")])
    assert wanted == [5, 10] and shape.done == "clients at 10"


def test_until_knee_gives_up_at_max_rooms():
    shape = UntilKnee(max_rooms=3, users_per_room=4, knee=None)
    assert ramp_until(shape, [Knee()] * 3) == [4, 8, 12]
    assert shape.done == "no knee up to --max-rooms 3"


def test_shapes_are_chosen_by_name():
    assert set(SHAPES) == {"ramp", "until-knee", "degrade"}
    assert all(SHAPES[name].name == name for name in SHAPES)


def test_degrade_ramps_then_holds_the_load_under_each_profile_and_comes_back():
    shape, status, steps = Degrade(rooms=2, users_per_room=5, profiles=("3g", "lossy-2pct")), Status(), []
    while (n := shape.tick(status)) is not None:
        steps.append((n, shape.network, shape.phase))
        status.participants, status.rooms = n, max(status.rooms, n // 5)
    assert steps == [(5, None, "ramp"), (10, None, "ramp"), (10, "3g", "network"), (10, "lossy-2pct", "network")]
    assert shape.network is None and shape.done == "2 room(s) measured under 2 network profile(s)"
