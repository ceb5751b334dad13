"""Client-bound windows: the rule on hand-made window records, and what it does to the knee, the
comparison's ranking and the trend on fake runs whose clients starve; failed streams count."""
import json
import sqlite3

import pytest

from reports import clientbound, compare, history, metrics, runfiles, series
from reports.clientbound import ClientRule

from support import fakerun

HEALTHY = {"phase": "target", "window": 3, "participants": 7, "samples": 8, "expected": 7,
           "missing_samples": 0, "duration_s": 7.1, "stats_ms_p50": 25.0, "lag_ms_max": 80.0,
           "lag_ms_mean": 3.0}


def edges(clients_cpu=8.0, throttled=0.014, machine=11.0, span_s=7.0, quota=1.4):
    """Probe rows at a window's edges: CPU seconds used over `span_s`; the clients' quota ran out in
    `throttled` of its 10-ms periods."""
    def pair(role, key, used, cores):
        return {"start": {"t": 0, key: 100.0, "cores": cores}, "end": {"t": span_s * 1000, key: 100.0 + used,
                                                                       "cores": cores}}
    clients = pair("clients", "cpu_s", clients_cpu, quota)
    periods = round(span_s * 100)
    clients["start"].update(periods=5000, throttled_periods=400)
    clients["end"].update(periods=5000 + periods, throttled_periods=400 + round(throttled * periods))
    return {"clients": clients, "machine": pair("machine", "cpu_s", machine, 2)}


def assess(window=None, e=None, fps=(15.0,) * 7, **kw):
    return clientbound.assess(dict(HEALTHY, **(window or {})), edges(**kw) if e is None else e, list(fps), 15,
                              1.0)


def test_network_windows_are_judged_but_kept_off_the_participant_curves():
    """A degrade shape's window under another network is judged like any other; it does not make
    the run's own figures at that count client-bound."""
    health = [{"phase": "target", "window": 3, "participants": 7, "client_bound": False, "reasons": []},
              {"phase": "network", "window": 4, "participants": 7, "client_bound": True, "reasons": ["starved"]}]
    assert series.health_series(health) == [{"participants": 7, "client_bound": False, "headroom": True}]
    assert "the clients, not the SFU" in clientbound.sentence(health)


def test_windows_whose_clients_cpu_nobody_probed_are_said_to_be_judged_by_the_pages_alone():
    """A remote grid's nodes carry no probe of the run: "headroom" would claim what was not measured."""
    seen = {"phase": "target", "window": 3, "participants": 7, "client_bound": False, "reasons": [], "cpu_probed": True}
    blind = dict(seen, window=4, cpu_probed=False)
    assert clientbound.sentence([seen]).startswith("The clients had headroom in all 1 measured windows")
    text = clientbound.sentence([seen, blind])
    assert "headroom" not in text and "CPU was not measured in 1 of the 2 windows" in text, text
    starved = dict(blind, client_bound=True, reasons=["starved"])
    assert "CPU was not measured in 1 of the 1 windows" in clientbound.sentence([starved])


def test_window_health_knows_which_windows_had_the_clients_cpu_probed():
    run = runfiles.Run(path=None, windows=[dict(HEALTHY, window=1), dict(HEALTHY, window=2)])
    run.server = [{"t": t, "role": role, "window": w, "edge": edge, "cpu_s": 1.0, "cores": 2}
                  for w, roles in ((1, ("machine", "clients")), (2, ("machine",)))
                  for role in roles for t, edge in ((0, "start"), (7000, "end"))]
    assert [h["cpu_probed"] for h in series.window_health(run, [])] == [True, False]


def test_window_health_gives_the_share_of_the_clients_cores_they_kept_busy():
    """What the calibration tells a late generator by: CPU seconds over the window's span, over the
    cores the clients may use (a quota's share of a core, or the cores of their cpuset)."""
    run = runfiles.Run(path=None, windows=[dict(HEALTHY, window=1), dict(HEALTHY, window=2)])
    run.server = [{"t": t, "role": "clients", "window": w, "edge": edge, "cpu_s": cpu_s, "cores": cores}
                  for w, cores, used in ((1, 1, 2.7), (2, 0.6, 2.1))
                  for t, edge, cpu_s in ((0, "start", 5.0), (5000, "end", 5.0 + used))]
    busy = [h["clients_busy"] for h in series.window_health(run, [])]
    assert busy == [pytest.approx(0.54), pytest.approx(0.7)]
    run.server = [r for r in run.server if r["window"] == 1]   # no probe row: not measured, not idle
    assert [h["clients_busy"] for h in series.window_health(run, [])] == [pytest.approx(0.54), None]


def test_a_window_with_headroom_is_not_client_bound():
    assert assess() == []


@pytest.mark.parametrize("change,expect", [
    (dict(throttled=0.13), "quota ran out in 13% of its scheduling periods"),
    (dict(machine=13.5), "2 cores were 96% busy"),
    (dict(fps=(9.0,) * 7), "encoded 9.0 of the source's 15 fps"),
    (dict(window={"lag_ms_max": 1500.0}), "held up 1.5 s"),
    (dict(window={"lag_ms_mean": 12.0}), "12 ms late on average"),
    (dict(window={"stats_ms_p50": 150.0}), "getStats round took 150 ms"),
    (dict(window={"missing_samples": 4}), "4 of 56 samples never arrived"),
    (dict(window={"duration_s": 16.0}), "took 16.0 s for 7 s of samples"),
])
def test_each_sign_of_a_starved_client(change, expect):
    reasons = assess(**change)
    assert len(reasons) == 1 and expect in reasons[0], reasons


def test_a_busy_machine_says_what_of_it_no_role_spent():
    """Steal (the hypervisor's) and softirq from the machine probe's rows, where a tenth of a core
    or more; below that, not named."""
    e = edges(machine=13.5)
    e["machine"]["start"].update(steal_s=50.0, softirq_s=20.0)
    e["machine"]["end"].update(steal_s=50.0 + 7 * 0.42, softirq_s=20.0 + 7 * 0.05)
    (reason,) = assess(e=e)
    assert reason.endswith("96% busy (the SFU and the clients share them; 0.42 core stolen by the hypervisor)"), reason
    e["machine"]["end"].update(softirq_s=20.0 + 7 * 0.31)
    assert assess(e=e)[0].endswith("; 0.42 core stolen by the hypervisor; 0.31 core in softirq)")


def test_full_client_socket_buffers_and_late_synthetic_publishers_are_the_clients():
    def with_udp(drops, received):
        e = edges()
        e["clients"]["start"].update(udp_rcvbuf_errors=1000, udp_in=50_000)
        e["clients"]["end"].update(udp_rcvbuf_errors=1000 + drops, udp_in=50_000 + received)
        return e
    assert assess(e=with_udp(10, 20_000)) == []           # 0.05%: a stray burst
    [reason] = assess(e=with_udp(100, 20_000))            # 0.5%
    assert "sockets dropped 0.5% of the datagrams" in reason
    assert assess(window={"pacing_ms_p99": 5.0}) == []
    [reason] = assess(window={"pacing_ms_p99": 25.0})
    assert "1% of their packets 25 ms late" in reason
    # a one-second window's pacing counts only at three times the threshold
    short = {"samples": 2, "duration_s": 1.1}
    assert assess(window=dict(short, pacing_ms_p99=25.0), span_s=1.0, machine=1.0) == []
    assert len(assess(window=dict(short, pacing_ms_p99=65.0), span_s=1.0, machine=1.0)) == 1


def test_a_window_whose_sfu_was_saturated_is_the_sfus_however_strained_its_clients():
    """Late synthetic publishers (27-31 ms at 56 participants) beside an in-house SFU out of its
    quota in 9 of 10 periods and dropping 62-65% of what reached it: the SFU had given way. The
    same strain beside an SFU with CPU to spare, or one without drops, stays the clients'."""
    def window(sfu_throttled, sfu_dropped, quota=True):
        run = runfiles.Run(path=None, meta={"media": {"fps": 15}, "config": {"sample_interval": 1.0}},
                           windows=[dict(HEALTHY, pacing_ms_p99=31.0)])
        e = edges()
        sfu = {"start": {"t": 0, "cpu_s": 10.0, "udp_in": 1000, "udp_rcvbuf_errors": 50},
               "end": {"t": 7000, "cpu_s": 13.5, "udp_in": 1000 + 7 * 4800,
                       "udp_rcvbuf_errors": 50 + round(7 * 4800 * sfu_dropped / (1 - sfu_dropped))}}
        if quota:
            sfu["start"].update(periods=100, throttled_periods=10)
            sfu["end"].update(periods=800, throttled_periods=10 + round(700 * sfu_throttled))
        e["sfu"] = sfu
        run.server = [dict(row, role=role, window=3, edge=edge) for role, pair in e.items()
                      for edge, row in pair.items()]
        [h] = series.window_health(run, [])
        return h
    saturated = window(0.9, 0.65)
    assert not saturated["client_bound"] and saturated["reasons"] == []
    assert "quota ran out in 90% of its periods and its sockets dropped 65%" in saturated["overruled"]
    assert "31 ms late" in saturated["overruled"]
    assert "In 1 other window the clients were strained, but the SFU was saturated" in \
        clientbound.sentence([saturated])
    assert window(0.3, 0.65)["client_bound"]        # CPU to spare: the drops may be the clients' bursts
    assert window(0.9, 0.002)["client_bound"]       # at its quota but keeping up
    assert not window(0.0, 0.65, quota=False)["client_bound"]   # no quota (a host of its own): drops say it


def test_averages_over_a_one_second_window_count_only_when_far_past_the_thresholds():
    """A room's freshly joined participants burst for a second: a short window's averages count
    only at three times their thresholds, and the machine's CPU share not at all."""
    burst = {"samples": 2, "duration_s": 1.1, "lag_ms_mean": 13.0, "stats_ms_p50": 93.0}
    assert assess(window=burst, throttled=0.2, machine=1.97, span_s=1.0) == []
    assert len(assess(window=burst, throttled=0.2, machine=1.97 * 3.5, span_s=3.5)) == 3
    starved = {"samples": 2, "duration_s": 2.4, "lag_ms_mean": 82.0, "stats_ms_p50": 946.0}
    assert len(assess(window=starved, throttled=0.95, span_s=1.0)) == 3


def test_the_throttled_share_cannot_pass_all_of_the_time():
    """Throttled time is summed over the CPUs a group runs on (a group starved on 2 CPUs is held
    back up to 2 s a second): runs recorded before periods were counted spread it over the cores."""
    old = edges()
    for row in old["clients"].values():
        del row["periods"], row["throttled_periods"]
    old["clients"]["start"]["throttled_s"], old["clients"]["end"]["throttled_s"] = 5.0, 5.0 + 1.55 * 7
    assert clientbound.throttled_share(old, "clients") == pytest.approx(1.55 / 2)
    [reason] = assess(e=old)
    assert "quota ran out in 78% of its scheduling periods" in reason
    assert clientbound.throttled_share(edges(throttled=1.0), "clients") == 1.0


def test_bandwidth_limited_senders_are_the_network_not_the_client():
    run = runfiles.Run(path=runfiles.Path("/x/r"), meta={"media": {"fps": 15}, "config": {"sample_interval": 1.0}},
                       windows=[HEALTHY])
    obs = [{"direction": "send", "kind": "video", "fps": 5.0, "limit": "bandwidth", "window": 3}] * 7
    assert series.window_health(run, obs)[0]["client_bound"] is False
    obs = [dict(o, limit="none") for o in obs]
    assert series.window_health(run, obs)[0]["reasons"] == ["the senders encoded 5.0 of the source's 15 fps"]


def test_the_rule_says_what_it_checks():
    text = ClientRule().text()
    assert "10%" in text and "95%" in text and "getStats" in text and "3 s" in text


@pytest.fixture(scope="module")
def starved(tmp_path_factory):
    """A run whose clients starve past 14 participants, though the SFU model would only degrade at 35,
    and a healthy run of another SFU."""
    parent = tmp_path_factory.mktemp("runs")
    return (fakerun.make_run(parent, sfu="janus", rooms=6, knee=35, client_bound_after=14, seed=1),
            fakerun.make_run(parent, sfu="mediasoup", rooms=6, seed=2, start_ms=1_760_000_100_000))


def test_the_knee_is_client_bound_not_the_sfus(starved):
    a = metrics.analyse(runfiles.load(starved[0]))
    assert a.knee.client_bound and a.knee.participants == 21
    assert "client-bound at 21" in a.knee.detail and "up to 14" in a.knee.detail
    assert a.headline["target_client_bound"] is True
    assert "the clients, not the SFU" in clientbound.sentence(a.health)


def test_compare_ranks_only_what_the_sfu_did(starved, tmp_path):
    path = compare.build(list(starved), tmp_path / "cmp")
    doc = json.loads((tmp_path / "cmp" / "tables.json").read_text())
    rows = doc["tables"]["ranking"]["rows"]
    assert [r[1] for r in rows] == ["mediasoup 1.1.2", "janus 1.1.2"]
    assert rows[1][2] == "client-bound at 21"
    assert all(v is None or str(v).startswith("(") for v in rows[1][4:])
    assert "client-bound at 21" in path.read_text()


def test_trend_never_records_client_bound_figures_as_the_sfus(starved, tmp_path):
    db = tmp_path / "results.sqlite"
    history.record(starved[0], db)
    with sqlite3.connect(db) as conn:
        names = {r[0]: r[1] for r in conn.execute("SELECT name, value FROM metrics")}
    assert names["client_bound"] == 1.0
    assert not {"knee", "coped", "recv_bps", "rtt_send_ms", "delay_ms"} & set(names)


def test_a_failed_participants_streams_count_as_failed(tmp_path):
    d = fakerun.make_run(tmp_path, rooms=2, seed=3)
    lines = (d / "samples.jsonl").read_text().splitlines()
    gone = [line for line in lines if '"r2u3"' in line and '"phase": "target"' in line]
    assert gone
    (d / "samples.jsonl").write_text("\n".join(x for x in lines if x not in gone) + "\n")
    a = metrics.analyse(runfiles.load(d))
    target = [o for o in a.obs if o["phase"] == "target"]
    # r2u3 sends 1 and receives 6; the other 6 of room 2 each miss its stream.
    assert sum(1 for o in target if o.get("missing")) == 1 + 6 + 6
    assert a.headline["stream_failure_rate"] == pytest.approx(13 / (14 + 14 * 6))
    healthy = metrics.analyse(runfiles.load(fakerun.make_run(tmp_path / "b", rooms=2, seed=3)))
    assert a.headline["recv_bps"] == pytest.approx(healthy.headline["recv_bps"] * (84 - 12) / 84, rel=0.02)
