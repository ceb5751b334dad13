"""A planned restart's figures (reports/restart.py) from the events a restart run writes."""
from reports.restart import restart_rows, restart_table


def events(back: dict[str, float], never: tuple[str, ...] = (), browsers: tuple[str, ...] = ("r1u1",)):
    started = [{"event": "participant_started", "user": u, **({} if u in browsers else {"client": "synthetic"})}
               for u in (*back, *never)]
    return [*started, {"event": "sfu_restart"}, {"event": "sfu_restarted", "down_s": 1.5},
            *({"event": "participant_recovered", "user": u, "seconds": s, "rejoins": 1} for u, s in back.items()),
            *({"event": "participant_not_recovered", "user": u, "rejoins": 3} for u in never)]


def test_the_shares_back_within_10_30_and_60_s_by_kind_of_client():
    rows = {r["clients"]: r for r in restart_rows(events({"r1u1": 4.0, "r1u2": 12.0, "r1u3": 35.0}, ("r1u4",)))}
    assert set(rows) == {"browser", "synthetic", "all"}
    every = rows["all"]
    assert every["restarted_participants"] == 4 and every["restart_down_s"] == 1.5
    assert (every["recovered_10s_pct"], every["recovered_30s_pct"], every["recovered_60s_pct"]) == (25.0, 50.0, 75.0)
    assert (every["recovery_first_s"], every["recovery_last_s"], every["not_recovered"]) == (4.0, 35.0, 1)
    assert every["rejoins"] == 1 + 1 + 1 + 3
    assert rows["browser"]["restarted_participants"] == 1 and rows["browser"]["recovered_10s_pct"] == 100.0
    assert rows["synthetic"]["not_recovered"] == 1


def test_nobody_back_is_zero_not_missing_and_a_run_without_a_restart_has_no_rows():
    (browser, synthetic, every) = restart_rows(events({}, ("r1u1", "r1u2")))
    assert every["recovered_60s_pct"] == 0.0 and every["recovery_first_s"] is None and every["not_recovered"] == 2
    assert restart_rows([{"event": "participant_started", "user": "r1u1"}]) == []
    assert restart_table([]).rows == []


def test_a_cut_link_is_reported_as_its_outage_with_the_browsers_ice_restarts_after_it():
    cut = [e for e in events({"r1u1": 2.0, "r1u2": 9.0}) if not e["event"].startswith("sfu_")]
    cut[2:2] = [{"event": "ice_restart", "user": "r1u1", "t": 500},   # at the join, before the outage: not its
                {"event": "link_cut", "seconds": 40, "t": 1000}, {"event": "ice_restart", "user": "r1u1", "t": 30000},
                {"event": "link_restored", "down_s": 40.2, "t": 41000}]
    rows = {r["clients"]: r for r in restart_rows(cut)}
    assert rows["all"]["restart_down_s"] == 40.2 and rows["all"]["recovered_10s_pct"] == 100.0
    assert (rows["browser"]["ice_restarts"], rows["synthetic"]["ice_restarts"], rows["all"]["ice_restarts"]) == (1, 0, 1)
    table = restart_table(cut)
    assert table.title == "After the clients' link was cut" and "the link's return after 40 s" in table.note
    assert restart_table(events({"r1u1": 2.0})).title == "After the planned restart"
