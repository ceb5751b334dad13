"""The runner's clock watch: a wall clock slewed as NTP slews it passes, however long the run; a
step beyond the tolerance stops the run with its size."""
import pytest

from sfubench.clock import ClockStepped, ClockWatch


class Clocks:
    def __init__(self):
        self.wall, self.mono = 1_800_000_000.0, 500.0

    def run(self, seconds, slew_ppm=0.0):
        self.mono += seconds
        self.wall += seconds * (1 + slew_ppm / 1e6)


def test_a_slewed_clock_passes_and_a_step_stops_the_run_with_its_size():
    c = Clocks()
    watch = ClockWatch(wall=lambda: c.wall, monotonic=lambda: c.mono)
    for _ in range(3600):        # an hour at NTP's fastest slew, 0.5 ms a second: 1.8 s in all
        c.run(1, slew_ppm=500)
        watch()
    c.run(30)                    # a long gap between looks (a browser opening) is no step either
    watch()
    c.wall -= 3600               # stepped back an hour
    with pytest.raises(ClockStepped, match=r"stepped -3600\.0 s") as e:
        watch()
    assert e.value.seconds == pytest.approx(-3600)
