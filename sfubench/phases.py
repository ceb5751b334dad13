"""The steps a shape asks for beyond rooms joining and being measured (`Step.phase`): a join storm,
a planned outage (the SFU restarted, or the clients' link cut), and a recovery from an overload.
Each is a function of the runner and its step, found by phase in PHASES, and minds its step's
network itself; the runner's own steps (ramp, network) stay with it."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .shapes import Step

if TYPE_CHECKING:
    from .runner import Participant, Runner

POLL_S = 0.25
# An SFU that uses no more of its budget than it did at the next count up on the way up, plus
# RECOVERED_MARGIN, has drained what an overload queued: a draining one uses more, up to all of it.
# Where no such count was measured, at most RECOVERED of it.
RECOVERED = 0.75
RECOVERED_MARGIN = 0.05
RECOVER_WAIT_S = 5.0


def storm(run: Runner, step: Step) -> None:
    """A join storm: the last storm's participants leave (down to `step.fresh_from`) and the SFU is
    given the settle time to let them go; then a window measures those still in while the storm's
    participants all join at once, validated together, `step.within` s for their videos."""
    if step.network != run.network:
        run.change_network(step.network)
    if run.status.participants > step.fresh_from:
        run.resize(step.fresh_from)
        run.wait(run.cfg.settle)
    run.measure("storm", run.cfg.ramp_samples, during=lambda: _join_storm(run, step),
                participants=step.participants)


def _join_storm(run: Runner, step: Step) -> None:
    size, background = step.participants - run.status.participants, run.status.participants
    run.event("storm_started", storm=size, background=background)
    run.say(f"storm: {size} participants joining at once, {background} already in")
    deadline = time.monotonic() + step.within
    for room in run.resize(step.participants):
        run.validate(room, deadline)
    run.event("storm_ended", storm=size, background=background)


def outage(run: Runner, step: Step) -> None:
    """A planned outage: the SFU stopped and started again or, with `step.cut_s`, the clients' link
    cut that long (under `step.network`); each participant in before it whose session ends rejoins
    after the adapter's delays (`step.rejoin`), and is timed until it gets video again from everyone
    of its room, for `step.within` s (from the restart, or from the link's return); then the step is
    measured."""
    before = [p for p in run.participants if not p.failed]
    began = time.time()
    if step.cut_s:
        _cut_link(run, step)
    else:
        _restart_server(run)
    up = time.time()   # a frame after this came after the outage
    back = time_back(run, before, up if step.cut_s else began, up, step)
    run.say(f"restart: {len(back)}/{len(before)} participants got video back within {step.within:g} s"
            + (f", the last after {max(back.values()):.1f} s" if back else ""))
    run.measure("ramp", run.cfg.ramp_samples)


def _restart_server(run: Runner) -> None:
    if run.restart_sfu is None:
        raise RuntimeError("this run's site cannot restart its SFU")
    began = time.time()
    run.event("sfu_restart", planned=True)
    run.say("sfu: restarting it, as a supervisor would (planned)")
    run.restart_sfu()
    run.event("sfu_restarted", down_s=round(time.time() - began, 2))
    run.say(f"sfu: answering again after {time.time() - began:.1f} s; timing every participant's video back")


def _cut_link(run: Runner, step: Step) -> None:
    """The clients' link under `step.network` (every packet lost) for `step.cut_s`, the pages'
    failures noted meanwhile, then back to the run's own."""
    if run.set_network is None:
        raise RuntimeError("this run's link has no emulator to cut it")
    run.set_network(step.network)
    began = time.monotonic()
    run.event("link_cut", network=step.network, seconds=step.cut_s)
    run.say(f"network: the clients' link cut both ways for {step.cut_s:g} s")
    while time.monotonic() - began < step.cut_s:
        run.note_failures()
        run.wait(POLL_S)
    run.set_network(run.network)
    run.event("link_restored", down_s=round(time.monotonic() - began, 2))
    run.say("network: the link is back; timing every participant's video back")


def time_back(run: Runner, before: list[Participant], began: float, up: float, step: Step) -> dict[str, float]:
    """Seconds from `began` until each of `before` had a frame of every video of its room after
    `up`, by user; rejoining those whose session ended, each after the next of its delays."""
    videos = {p.id: [(p.id, q.id) for q in before if q.room == p.room and q is not p and run.cfg.publishes(q.id)]
              for p in before}
    tries: dict[str, int] = dict.fromkeys(videos, 0)
    due: dict[str, float] = {}
    back: dict[str, float] = {}
    deadline = time.monotonic() + step.within
    run.follow(True)
    while len(back) < len(before) and time.monotonic() < deadline:
        run.note_failures()
        now = time.monotonic()
        for p in before:
            if (step.rejoin and p.failed and p.failed != "left" and p.id not in due
                    and tries[p.id] < len(run.reconnect_s)):
                due[p.id] = now + run.reconnect_s[tries[p.id]]
            if p.id in due and now >= due[p.id]:
                del due[p.id]
                tries[p.id] += 1
                run.rejoin(p.id)
                run.follow(True)
        for p in before:
            if p.id in back or p.failed:
                continue
            first = run.collector.first_frames(videos[p.id], up)
            if None not in first.values():
                back[p.id] = round(max(first.values(), default=up) - began, 3)
                run.event("participant_recovered", room=p.room, user=p.id, seconds=back[p.id], rejoins=tries[p.id])
        run.wait(POLL_S)
    for p in before:
        if p.id not in back:
            run.event("participant_not_recovered", room=p.room, user=p.id, rejoins=tries[p.id], within=step.within)
    return back


def recover(run: Runner, step: Step) -> None:
    """The run taken down to `step.participants` after its ramp overloaded the SFU, and held there
    until the SFU uses no more CPU than at the next count up on the way up (`step.within` s at most);
    nothing is measured. Without a reading of the SFU's CPU it holds RECOVER_WAIT_S."""
    run.resize(step.participants)
    above = [c for c in run.sfu_used if c >= step.participants]
    limit = run.sfu_used[min(above)] + RECOVERED_MARGIN if above else RECOVERED
    began = time.monotonic()
    while True:
        share = run.sfu_share(RECOVER_WAIT_S)
        waited = round(time.monotonic() - began, 1)
        if share is None or share <= limit or waited >= step.within:
            break
    fields = {"seconds": waited, "budget_share": None if share is None else round(share, 2),
              "limit": round(limit, 2)}
    if share is not None and share > limit:
        run.event("sfu_not_recovered", **fields)
        run.say(f"recovery: the SFU still used {share:.0%} of its budget after {waited:g} s at "
                f"{step.participants} participants ({limit:.0%} on the way up); narrowing on regardless")
    else:
        run.event("sfu_recovered", **fields)


PHASES = {"storm": storm, "restart": outage, "recover": recover}
