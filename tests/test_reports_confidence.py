"""Differences beyond the noise (reports/confidence.py): the bootstrap interval of the difference of
two SFUs' medians over their runs, against what the runs plainly say."""
from statistics import median

from reports.confidence import Span, ahead, interval, verdicts


def test_the_interval_leaves_out_zero_only_when_the_runs_part():
    a, b = Span((40, 42, 44, 41, 43)), Span((30, 31, 29, 32, 30))
    lo, hi = interval(a, b)
    # within what any resample could give, and around the medians' own difference
    assert 44 - 29 >= hi >= median(a.values) - median(b.values) >= lo > 0
    same = interval(Span((40, 42, 44, 41, 43)), Span((41, 43, 40, 44, 42)))
    assert same[0] < 0 < same[1]
    assert interval(a, b) == interval(a, b)   # seeded: a report says the same each time


def test_one_run_or_an_open_span_has_no_interval():
    assert interval(Span((42,)), Span((30, 31))) is None
    assert interval(Span((70,), open_above=True), Span((30, 31))) is None
    assert ahead(Span((70,), open_above=True), Span((30, 31)))            # its lowest above the other's highest
    assert not ahead(Span((30, 31)), Span((28,), open_above=True))
    assert not ahead(Span((42,)), Span((30,)))                            # nothing measures the noise


def test_the_words_name_the_interval_or_why_they_are_level():
    words = verdicts({"a": Span((40, 42, 44)), "b": Span((30, 31, 29)), "c": Span((29, 31, 30)), "d": None},
                     "knee", "higher")
    assert words[0].startswith("a's knee is higher than b's: 42 (40–44) vs 30 (29–31); 95% interval of the "
                               "difference"), words
    assert words[1].startswith("b and c are level at this resolution (knee 30 (29–31) vs 30 (29–31): the 95% "
                               "interval of the difference"), words
    assert verdicts({"x": Span((9.0,)), "y": Span((14.0,))}, "cost", "lower", higher_is_better=False) == \
        ["x and y are level at this resolution (cost 9 vs 14: one run of either: nothing measures the noise)."]
