"""The runner's wall clock, watched against its monotonic one. Records carry wall time (the pages
stamp theirs with it, and a window gathers the samples stamped inside it), so a step of the wall
clock mid-run (an NTP step, an operator's `date -s`) would shift every record after it against the
ones before and leave a window open across it with the wrong samples. NTP's ordinary correction
slews the clock (at most 0.5 ms a second), which moves it far less than the tolerance between two
looks; a step beyond it costs the window open across it, which the runner discards and measures
again (a VM's clock is stepped now and then), rather than let it report figures made across the
step. A clock that steps in every try of a window stops the run."""
from __future__ import annotations

import time

STEP_TOLERANCE_S = 0.5
# How far another host's clock may stray from the runner's before the run says so: pages stamp
# samples and frames with their node's clock, windows open at the runner's time, and a delay is one
# node's time minus another's (NTP keeps cloud hosts within a few ms of each other).
OFFSET_TOLERANCE_MS = 20.0


class ClockStepped(RuntimeError):
    def __init__(self, seconds: float):
        super().__init__(f"the runner's wall clock stepped {seconds:+.1f} s during the run: records either side "
                         "of the step cannot be compared (let NTP slew the clock, not step it, while a run goes on)")
        self.seconds = seconds


class ClockWatch:
    """A run's watch: raises ClockStepped when the wall clock has moved more than `tolerance`
    seconds away from the monotonic clock since the previous look (the run looks about once a
    second; a slew would need 1,000 s between looks to pass for a step)."""

    def __init__(self, tolerance: float = STEP_TOLERANCE_S, wall=time.time, monotonic=time.monotonic):
        self.tolerance, self.wall, self.monotonic = tolerance, wall, monotonic
        self.offset = wall() - monotonic()

    def __call__(self) -> None:
        offset = self.wall() - self.monotonic()
        moved, self.offset = offset - self.offset, offset
        if abs(moved) > self.tolerance:
            raise ClockStepped(moved)
