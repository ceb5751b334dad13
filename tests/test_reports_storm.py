"""Join storms' figures (reports/storm.py) over the records a storm run writes, and the storm knee."""
from reports.knee import find_knee
from reports.storm import StormRule, storm_series, storm_table


def storm_records(background: int, size: int, times: list[float], failed: int = 0):
    """The events, checks and server rows of one storm of `size` on `background`: each newcomer
    gets one video per time in `times` (its first frame that long after the joins), the first
    `failed` newcomers none in time."""
    count = background + size
    events = [{"event": "storm_started", "participants": background, "storm": size, "background": background}]
    checks = []
    for i in range(size):
        user = f"s{count}u{i}"
        checks.append({"user": user, "peer": user, "ok": True, "participants": count})   # its own camera
        for j, t in enumerate(times):
            ok = i >= failed
            checks.append({"user": user, "peer": f"p{j}", "ok": ok, "participants": count,
                           **({"first_frame_s": t} if ok else {})})
    server = [{"phase": "storm", "window": count, "edge": edge, "role": "sfu", "participants": count,
               "t": t, "cpu_s": cpu} for edge, t, cpu in (("start", 0, 10.0), ("end", 10_000, 14.0))]
    return events, checks, server


def test_a_storm_is_one_row_at_its_count_with_its_first_frames_failures_and_cost():
    e1, c1, s1 = storm_records(14, 14, [0.5, 1.0, 1.5])
    e2, c2, s2 = storm_records(14, 28, [1.0, 2.0, 4.0], failed=2)
    windows = [{"phase": "storm", "participants": 42, "freezes_per_min": 3.5, "loss_pct": 1.25},
               {"phase": "ramp", "participants": 14, "freezes_per_min": 0.0}]
    rows = storm_series(c1 + c2, e1 + e2, windows, s1 + s2)
    assert [(r["participants"], r["storm"], r["joins"], r["joins_failed"]) for r in rows] == [(28, 14, 14, 0),
                                                                                             (42, 28, 28, 2)]
    first, second = rows
    assert (first["first_frame_p50_s"], first["first_frame_max_s"]) == (1.0, 1.5)   # own cameras left out
    assert second["first_frame_p95_s"] == 4.0 and second["storm_sfu_cores"] == 0.4
    assert (second["storm_background_freezes_per_min"], second["storm_background_loss_pct"]) == (3.5, 1.25)
    assert first["storm_background_freezes_per_min"] is None   # no storm window at 28: not measured, not 0
    table = storm_table([{"participants": 14}, *rows])
    assert [r[:3] for r in table.rows] == [[28, 14, 0], [42, 28, 2]]


def test_the_storm_knee_is_the_first_storm_too_slow_or_failing_at_it_and_the_next():
    def row(count, p95, failed=0, bound=False):
        return {"participants": count, "first_frame_p95_s": p95, "joins_failed": failed, "client_bound": bound}
    knee = find_knee([row(28, 1.2), row(42, 3.4), row(70, 5.0)], StormRule())
    assert (knee.participants, knee.criterion, knee.coped, knee.of) == (42, "first_frame", 28, "storm knee")
    knee = find_knee([row(28, 1.2), row(42, 3.4), row(70, 1.9), row(126, 2.0, failed=1)], StormRule())
    assert (knee.participants, knee.criterion) == (126, "joins"), knee   # one slow storm alone is no knee
    knee = find_knee([row(28, 1.2), row(42, 1.3), row(70, 9.0, bound=True)], StormRule())
    assert knee.client_bound and knee.participants == 70
    assert find_knee([row(28, 1.2), row(42, 2.9)], StormRule()).participants is None
