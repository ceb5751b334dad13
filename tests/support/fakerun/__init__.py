"""Fake run folders: realistic ones, written per docs/contracts.md, for the tests and the report's
benchmark (bench/report.py). `make_run(parent, **options)` writes one (options: FakeRun's fields).

The load follows the study's ramp: rooms added one by one, each validated by video checks and
measured with `ramp_samples` getStats samples of its participants one second apart; at target load
every participant is sampled `target_samples` times; background ticks sample everyone once. Counters
are cumulative per stream, so bitrates computed from them come out as modelled. Past `knee`
participants the SFU degrades (model.py); past `client_bound_after` the clients are starved instead.
What each file holds is faked apart: the streams' getStats samples (streams.py), the probes' rows
(probes.py), the scores of frames and playback (scores.py), the run's own records (run.py)."""
from .run import FakeRun, make_run

__all__ = ["FakeRun", "make_run"]
