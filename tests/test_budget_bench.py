"""bench/budget.py's verdicts over repeated rounds (the runs themselves are the default run, which
tests/test_study.py covers): each round's ratio, the median's verdict, lower bounds kept as such."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import budget  # noqa: E402


def run(knee, criterion="freezes"):
    return {"knee": knee, "criterion": criterion, "detail": f"{criterion} at {knee}", "sfu_cores_used": 0.5}


def test_a_round_is_judged_by_its_ratio_and_a_client_bound_one_is_a_lower_bound():
    assert budget.judge(run(70), run(126), 0.5) == {"ratio": 1.8, "bound": False, "verdict": "as expected"}
    assert budget.judge(run(98), run(137), 0.5)["verdict"] == "OUTSIDE the expected range"
    # the steps below the knees (a room's, or less once narrowed down) say how far outside it may be
    coarse = budget.judge({**run(14), "step": 7}, {**run(35), "step": 7}, 0.25)
    assert coarse["ratio"] == 2.5 and coarse["verdict"] == (
        "OUTSIDE the expected range (the steps of 7 and 7 participants below the knees leave it anywhere "
        "from 2.00x to 5.00x)")
    narrowed = budget.judge({**run(24), "step": 2}, {**run(64), "step": 2}, 0.19)
    assert narrowed["verdict"].endswith("(the steps of 2 and 2 participants below the knees leave it anywhere "
                                        "from 2.58x to 2.91x)")
    assert budget.judge({**run(28), "step": 7}, {**run(49), "step": 7}, 0.25)["verdict"] == "as expected"
    bound = budget.judge(run(70), run(105, "client"), 0.5)
    assert bound["bound"] and bound["ratio"] == 1.5 and "at least 1.50x" in bound["verdict"]
    none = budget.judge(run(77, "client"), run(140), 0.5)
    assert none["ratio"] is None and none["verdict"].startswith("no SFU knee at 0.5 core")


def test_rounds_are_summed_up_by_their_median_ratio_with_the_spread():
    rounds = [budget.judge(run(98), run(154), 0.5), budget.judge(run(70), run(126), 0.5),
              budget.judge(run(70), run(140), 0.5)]
    s = budget.summarise(rounds)
    assert s["ratio"] == 1.8 and s["runs"] == 3 and s["verdict"] == "as expected"
    assert s["ratio_runs"] == [154 / 98, 1.8, 2.0]
    assert abs(s["ratio_spread"] - (2.0 - 154 / 98) / 1.8) < 1e-9
    # a median under the band that rests on a client-bound round is a lower bound, not a failure
    low = budget.summarise([budget.judge(run(70), run(98, "client"), 0.5), budget.judge(run(98), run(137), 0.5)])
    assert low["verdict"].startswith("at least 1.40x")
    assert budget.summarise([budget.judge(run(7, "client"), run(7), 0.5)])["verdict"] == "no ratio in any round"


def test_a_round_the_generator_cannot_finish_is_judged_by_the_doubling_below_it():
    knees = {0.25: run(28), 0.5: run(49), 1.0: run(77, "client")}
    asked = []

    def knee_at(sfu, cores):
        asked.append(cores)
        return {**knees[cores], "cores": cores}

    res = budget.one_round("inhouse", 0.5, knee_at)
    assert asked == [0.5, 1.0, 0.25]
    assert res["bound"] and res["below"]["ratio"] == 1.75 and res["below"]["verdict"] == "as expected"
    s = budget.summarise([res, budget.one_round("inhouse", 0.5, lambda _, c: {**run(70 * c * 2), "cores": c})])
    assert s["ratio_runs"] == [1.75, 2.0]
    assert s["verdict"] == "as expected (1 of 2 round(s) judged by the doubling below the budget)"
    # a round that reaches its knee at twice the budget runs no third budget
    asked.clear()
    knees[1.0] = run(98)
    assert "below" not in budget.one_round("inhouse", 0.5, knee_at) and asked == [0.5, 1.0]
    # with no knee at half the budget either, the round keeps its lower bound
    knees[1.0], knees[0.25] = run(77, "client"), run(None, "client")
    assert budget.summarise([budget.one_round("inhouse", 0.5, knee_at)])["verdict"].startswith("at least 1.57x")


def test_a_ratio_outside_the_band_says_what_the_sfu_gained_per_packet():
    # Janus here at 0.19 and 0.38 core: 28 and 70 participants coped, 9.04 and 7.28 µs a packet there
    one = {**run(29), "step": 1, "us_per_packet_coped": 9.04, "sfu_cores_coped": 0.188}
    two = {**run(71), "step": 1, "us_per_packet_coped": 7.28, "sfu_cores_coped": 0.38}
    verdict = budget.judge(one, two, 0.19)["verdict"]
    assert verdict.startswith("OUTSIDE the expected range (the steps of 1 and 1")
    assert verdict.endswith("; where it last coped it used 0.19 then 0.38 core (2.02x) at 9.0 then 7.3 µs "
                            "a forwarded packet (1.24x the packets per CPU-second)")
    # inside the band, or without the cost, nothing is added
    assert budget.judge({**run(70), "us_per_packet_coped": 9.0, "sfu_cores_coped": 0.5},
                        {**run(126), "us_per_packet_coped": 6.0, "sfu_cores_coped": 1.0},
                        0.5)["verdict"] == "as expected"
    assert "µs" not in budget.judge(run(29), run(71), 0.19)["verdict"]


def test_a_broadcasts_steps_are_counted_in_viewers_and_an_unknown_preset_is_refused(capsys):
    coarse = budget.judge({**run(100), "step": 25, "unit": "viewers"}, {**run(300), "step": 60, "unit": "viewers"}, 0.2)
    assert "the steps of 25 and 60 viewers below the knees" in coarse["verdict"]
    assert budget.main(["--preset", "no-such-preset"]) == 2
    assert "no-such-preset" in capsys.readouterr().err
