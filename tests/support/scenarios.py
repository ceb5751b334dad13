"""Scenarios the tests drive the engine through (loadtest.run's `scenario`), shared by the suites that
put an SFU or a synthetic driver through a leave and a rejoin."""


def leave_and_rejoin(user: str, pause_s: float, target_samples: int, settle_s: float = 0):
    """The scenario: room 1 filled, validated and measured; `user` leaves, is gone `pause_s`, joins
    again with the same id (everyone renegotiates); the room validated and measured again. Each
    measurement waits `settle_s` after its validation: the joins' own burst (pages loading the SFU's
    client library, encoders starting) is not what these suites measure."""
    def scenario(runner) -> None:
        want = runner.shape.tick(runner.status).participants
        runner.status.rooms = 1
        runner.event("room_started", room=1)
        while runner.status.participants < want:
            runner.start_participant(1)
        runner.validate(1)
        runner.wait(settle_s)
        runner.measure("ramp", 2)
        runner.leave(user)
        runner.wait(pause_s)
        runner.rejoin(user)
        runner.validate(1)
        runner.wait(settle_s)
        runner.measure("target", target_samples)
    return scenario
