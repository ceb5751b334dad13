import pytest

from reports.knee import Knee, KneeRule, as_stopped, find_knee, plateaus

MBPS = 1e6


def series(key, values, start=7, step=7, **const):
    return [{"participants": start + i * step, key: v, **const} for i, v in enumerate(values)]


def test_plateau_is_the_highest_running_median_of_three():
    assert plateaus([1.0, 5.0, 1.2, 1.3, 1.25, 0.2]) == [1.0, 1.0, 1.2, 1.3, 1.3, 1.3]
    assert plateaus([2.0]) == [2.0]


def test_flat_series_has_no_knee():
    knee = find_knee(series("recv_bps", [1.5 * MBPS] * 10))
    assert knee == Knee()
    assert knee.participants is None


def test_bitrate_drop_below_fraction_of_plateau():
    values = [1.5, 1.52, 1.48, 1.5, 1.45, 1.1, 0.8, 0.5]
    knee = find_knee(series("recv_bps", [v * MBPS for v in values]))
    # plateau 1.5 (median of 1.52, 1.48, 1.5): 1.1 < 0.8 × 1.5 = 1.2 and so is the next one
    assert (knee.participants, knee.criterion) == (42, "bitrate")
    assert knee.plateau_bps == pytest.approx(1.5 * MBPS)
    assert "1.10 Mbps" in knee.detail and "1.50 Mbps plateau" in knee.detail


def test_a_single_dip_is_not_a_knee():
    values = [1.5, 1.5, 1.5, 0.9, 1.5, 1.5]
    assert find_knee(series("recv_bps", [v * MBPS for v in values])).participants is None


def test_a_drop_at_the_last_count_measured_is_a_knee():
    values = [1.5, 1.5, 1.5, 1.5, 0.9]
    assert find_knee(series("recv_bps", [v * MBPS for v in values])).participants == 35


@pytest.mark.parametrize("values", [
    [1.5, 5.0, 1.5, 1.45, 1.5, 1.4],         # second count high
    [1.5, 1.5, 1.5, 3.0, 1.5, 1.5, 1.4],     # one high count later on
    [0.6, 1.2, 1.5, 1.5, 1.5, 1.45],         # bandwidth estimation still ramping up at first
])
def test_outliers_and_slow_starts_do_not_make_a_knee(values):
    assert find_knee(series("recv_bps", [v * MBPS for v in values])).participants is None


def test_an_sfu_failing_at_the_second_room():
    assert find_knee(series("recv_bps", [v * MBPS for v in (1.5, 0.5, 0.4)])).participants == 14


def test_the_fraction_is_configurable():
    values = [1.5, 1.5, 1.5, 1.3, 1.3]
    assert find_knee(series("recv_bps", [v * MBPS for v in values])).participants is None
    assert find_knee(series("recv_bps", [v * MBPS for v in values]), KneeRule(bitrate_fraction=0.9)).participants == 28


def test_rtt_climb():
    knee = find_knee(series("rtt_send_ms", [3, 4, 3, 50, 250, 900]))
    assert (knee.participants, knee.criterion) == (35, "rtt")
    assert "250 ms" in knee.detail


def test_freezes_climb():
    knee = find_knee(series("freezes_per_min", [0, 0, 0.1, 1.5, 3.0]))
    assert (knee.participants, knee.criterion) == (28, "freezes")


def test_checks_start_failing():
    knee = find_knee(series("check_pass_rate", [1.0, 0.98, 1.0, 0.85, 0.6]))
    assert (knee.participants, knee.criterion) == (28, "checks")
    assert "85.0%" in knee.detail


def test_the_earliest_criterion_wins_and_bitrate_wins_ties():
    rows = series("recv_bps", [v * MBPS for v in (1.5, 1.5, 1.5, 1.5, 0.5, 0.4)])
    for r, rtt in zip(rows, (3, 3, 300, 400, 500, 600)):
        r["rtt_send_ms"] = rtt
    assert (find_knee(rows).participants, find_knee(rows).criterion) == (21, "rtt")
    for r, rtt in zip(rows, (3, 3, 3, 3, 500, 600)):
        r["rtt_send_ms"] = rtt
    assert (find_knee(rows).participants, find_knee(rows).criterion) == (35, "bitrate")


def test_missing_values_are_skipped_and_counts_are_sorted():
    rows = [{"participants": 21, "recv_bps": 0.5 * MBPS}, {"participants": 7, "recv_bps": 1.5 * MBPS},
            {"participants": 14}, {"participants": 28, "recv_bps": None}, {"participants": 35, "recv_bps": 0.4 * MBPS}]
    assert find_knee(rows).participants == 21
    assert find_knee([]) == Knee()


def test_rule_text_states_the_thresholds():
    text = KneeRule(bitrate_fraction=0.7, rtt_ms=150, freezes_per_min=2, min_pass_rate=0.95).text()
    for part in ("70%", "150 ms", "2 per stream-minute", "95%", "next one measured"):
        assert part in text


def test_a_knee_the_last_windows_take_back_is_named_where_the_run_stopped_on_it():
    """Janus at 1 core: the ramp stopped on a knee at 56 (1.19 freezes per stream-minute, 63 bad
    too); its target window at 63 pooled in, the whole run's figures show none. The knee stays the
    figures', and says why the run stopped where it did."""
    stopped = [{"event": "target_reached", "reason": "knee at 56 participants: 1.19 freezes per stream-minute, above 1"}]
    series = [{"participants": n, "freezes_per_min": f} for n, f in ((42, 0.0), (49, 0.18), (56, 1.19), (63, 0.86))]
    knee = as_stopped(find_knee(series), stopped)
    assert knee.participants is None and knee.stopped_on == knee.judged == 56 and knee.cell() == "56 (unconfirmed)"
    assert knee.detail == ("the SFU coped with every load measured; the run stopped on a knee its figures showed "
                           "then (knee at 56 participants: 1.19 freezes per stream-minute, above 1), which its "
                           "last windows do not confirm")
    confirmed = [*series[:3], {"participants": 63, "freezes_per_min": 1.4}]
    assert as_stopped(find_knee(confirmed), stopped) == find_knee(confirmed)
    assert find_knee(confirmed).cell() == "56" and find_knee(series).cell() == "none"
    assert as_stopped(find_knee(series), [{"event": "target_reached", "reason": "no knee up to --max-rooms 9"}]) \
        == find_knee(series)


def freezing(counts, bound=(), headroom=True):
    """Rows of an SFU that freezes from 38 participants on; `bound`: counts whose clients were strained."""
    return [{"participants": c, "freezes_per_min": 5.0 if c >= 38 else 0.0, "client_bound": c in bound,
             "headroom": headroom and c not in bound} for c in counts]


def test_a_client_bound_count_below_one_with_headroom_is_left_unjudged():
    # a knee narrowed down from above: 36 measured after 42 and 49, its clients strained once
    knee = find_knee(freezing([7, 14, 21, 28, 35, 36, 38, 42, 49], bound={36}))
    assert (knee.participants, knee.criterion, knee.coped) == (38, "freezes", 35)


def test_a_client_bound_count_no_higher_count_takes_back_is_the_clients_limit():
    knee = find_knee(freezing([7, 14, 21, 28, 35, 36], bound={36}))
    assert knee.client_bound and knee.participants == 36 and "up to 35" in knee.detail
    # higher counts whose clients were strained too (their windows the SFU's saturation overruled)
    strained = freezing([42], headroom=False)
    knee = find_knee(freezing([7, 14, 21, 28, 35, 36], bound={36}) + strained)
    assert knee.client_bound and knee.participants == 36
