from sfubench.shape import RoomRamp, Status


def test_room_ramp_adds_one_full_room_per_tick_then_stops():
    shape, status, wanted = RoomRamp(rooms=3, users_per_room=7), Status(), []
    while (n := shape.tick(status)) is not None:
        wanted.append(n)
        status.participants, status.rooms = n, status.rooms + 1
    assert wanted == [7, 14, 21]


def test_room_ramp_resumes_from_where_the_run_is():
    assert RoomRamp(rooms=2, users_per_room=5).tick(Status(participants=5, rooms=1)) == 10
    assert RoomRamp(rooms=2, users_per_room=5).tick(Status(participants=10, rooms=2)) is None
