"""bench/forwarding.py for real, briefly: one all-synthetic room of 5 against the in-house SFU and
Janus, each pinned to its own core; both must forward everyone's media to everyone, and the cost
and generator tables and the summary (the keys `make bench` users read) must come out for both."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import cpushare  # noqa: E402
import forwarding  # noqa: E402

from support.tiers import full  # noqa: E402


@full
def test_both_sfus_forward_a_synthetic_room_and_their_cost_is_compared(tmp_path):
    out = tmp_path / "forwarding.json"
    # Own lab names, so `make bench` or a loadtest beside the suite does not collide with it.
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "forwarding.py"), "--sfus", "inhouse,janus",
         "--rooms", "1", "--users-per-room", "5", "--knee-load", "5", "--lab-prefix", "sfubft", "--lab-subnet", "127.0.5",
         "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    res = json.loads(out.read_text())
    assert list(res["cost"]) == ["inhouse", "janus"]
    for sfu, steps in res["cost"].items():
        row = steps["5"]
        # 5 members each receive 4 audio and 4 video tracks
        assert row["fwd_streams"] == 5 * 4 * 2, (sfu, row)
        # at least 50 audio packets/s and one packet per video frame (15 fps) for each of them
        assert row["fwd_pps"] >= 5 * 4 * (50 + 15) * 0.9, (sfu, row)
        assert 0 < row["sfu_us_per_packet"] < 10_000, (sfu, row)
        gen = res["generator"][sfu]
        assert {g["phase"] for g in gen} == {"ramp", "target"}, gen
        assert all(g["received_streams"] == 40 and g["cores"] > 0 for g in gen), gen
        # the clients' namespace's receive-buffer drops, read for every window: none for a room of 5
        assert all(g["socket_drops"] == 0 for g in gen), gen
    assert "inhouse / janus per packet" in r.stdout and "streams per core" in r.stdout, r.stdout
    summary = res["summary"]
    for sfu in ("inhouse", "janus"):
        # the knee load's figure is the cost table's; twice it (10) was not reached
        assert summary["sfus"][sfu]["us_per_forwarded_packet"] == res["cost"][sfu]["5"]["sfu_us_per_packet"]
        assert summary["sfus"][sfu]["us_per_forwarded_packet_2x"] is None
    ratio = summary["ratios"]["inhouse/janus"]["us_per_forwarded_packet"]
    assert ratio == summary["sfus"]["inhouse"]["us_per_forwarded_packet"] / summary["sfus"]["janus"]["us_per_forwarded_packet"]
    gen = summary["generator"]
    if gen["streams_per_core"] is not None:   # None: no window kept the pacing under 1 ms, said so
        # an average over the windows' seconds (stream-seconds over seconds): 40 up to rounding
        assert abs(gen["received_streams"] - 40) < 1e-9 and gen["pacing_p99_ms"] < 1.0 and gen["socket_drops"] == 0, gen
    else:
        assert "no step kept the pacing p99 under" in r.stdout, r.stdout
    assert "inhouse / SFU at 5" in r.stdout, r.stdout
    # where the CPU went, from the profiles both processes wrote (the in-house SFU's and the generator's)
    shares = res["cpu_shares"]
    assert set(shares) == {"inhouse SFU", "generator (inhouse)", "generator (janus)"}, shares
    for name, parts in shares.items():
        assert parts and abs(sum(parts.values()) - 1) < 1e-9, (name, parts)
    # A room of 5 for seconds is a dozen samples a process (11 and 12 in CI runs): a part of a fifth,
    # the SFU's routing, drew none of them in one. The kernel's, a fifth to a half of each of the three,
    # all but cannot; the parts are known answers on a fixed profile below, and the classifier is checked
    # against the functions of the very binaries profiled here.
    assert any(parts.get("system calls", 0) > 0 for parts in shares.values()), shares
    folder = Path(re.search(r"profiles in ([^,)\s]+)", r.stdout).group(1))
    sfu_functions = functions_of_profiled_binary(folder / "profiles-inhouse-1" / "sfu.pprof")
    generator_functions = functions_of_profiled_binary(folder / "profiles-inhouse-1" / "cpu.pprof")
    shutil.rmtree(folder)
    for part in ("routing", "SRTP", "RTCP and feedback", "system calls", "pion (tracks, ICE, DTLS)"):
        assert any(cpushare.part_of([fn]) == part for fn in sfu_functions), part
    for part in ("receiving (fast path, counters, frames)", "sending (pacers, packets, direct writes)", "SRTP"):
        assert any(cpushare.part_of([fn]) == part for fn in generator_functions), part
    assert "Where the CPU went" in r.stdout, r.stdout
    # the kernel's floor under the generator, measured here at the runs' packet rates
    floor = summary["generator"]["kernel_floor"]
    assert floor["receive_us"] > 0 and floor["send_us"] > floor["receive_us"], floor
    assert floor["waking_send_us"] > floor["send_us"], floor   # the SFU's wake-up, paid by the sender
    assert 50 < floor["pps_per_stream"] < 150 and floor["streams_per_core_ceiling"] > 0, floor
    assert "the kernel's floor here" in r.stdout, r.stdout
    # the generator against that floor, and the machine it is of
    assert summary["machine"]["cpus"] >= 2 and summary["machine"]["cpu_model"], summary["machine"]
    if gen["streams_per_core"] is not None:
        assert gen["share_of_kernel_ceiling"] == gen["streams_per_core"] / floor["streams_per_core_ceiling"], gen
        assert 0 < gen["share_of_kernel_ceiling"] < 1 and "x that ceiling on" in r.stdout, (gen, r.stdout)


def functions_of_profiled_binary(profile: Path) -> list[str]:
    """The function names in the executable a pprof profile was taken of (its first mapping)."""
    mappings = cpushare.raw(profile).split("\nMappings\n", 1)[1]
    binary = mappings.splitlines()[0].split()[2]
    nm = subprocess.run(["go", "tool", "nm", binary], capture_output=True, text=True, check=True).stdout
    return [line.split(maxsplit=2)[2] for line in nm.splitlines() if line.split()[1:2] == ["T"]]


def test_the_generator_is_set_against_the_kernels_ceiling_of_the_same_run():
    floor = {"streams_per_core_ceiling": 10_000.0, "pps_per_stream": 62.5}
    figures = forwarding.against_the_kernel({"streams_per_core": 2_000.0}, floor)
    assert figures["share_of_kernel_ceiling"] == 0.2
    assert figures["us_per_received_packet"] == 8.0   # 2,000 streams of 62.5 packets/s on a core
    unknown = {"share_of_kernel_ceiling": None, "us_per_received_packet": None}
    assert forwarding.against_the_kernel({"streams_per_core": None}, floor) == unknown
    assert forwarding.against_the_kernel({"streams_per_core": 2_000.0}, None) == unknown


def test_rounds_are_summed_up_as_medians_with_their_spread():
    def one(janus_us, ratio, per_core):
        return {"generator": {"streams_per_core": per_core, "pacing_p99_ms": 0.2, "received_streams": 500},
                "sfus": {"janus": {"participants": 42, "us_per_forwarded_packet": janus_us,
                                   "us_per_forwarded_packet_2x": None}},
                "ratios": {"inhouse/janus": {"us_per_forwarded_packet": ratio}}, "runs": 1}
    s = forwarding.combined([one(18.0, 0.5, 2000), one(20.0, 0.4, 2600), one(22.0, 0.45, 2200)])
    assert s["runs"] == 3
    janus = s["sfus"]["janus"]
    assert janus["us_per_forwarded_packet"] == 20.0 and janus["us_per_forwarded_packet_runs"] == [18.0, 20.0, 22.0]
    assert janus["us_per_forwarded_packet_spread"] == 0.2 and janus["participants"] == 42
    assert janus["us_per_forwarded_packet_2x"] is None and janus["us_per_forwarded_packet_2x_spread"] is None
    assert s["ratios"]["inhouse/janus"]["us_per_forwarded_packet"] == 0.45
    assert s["generator"]["streams_per_core"] == 2200


def test_the_generator_sustains_a_load_only_where_its_pacing_held_and_its_sockets_dropped_nothing():
    rows = {"inhouse": [window(504, 0.3, 0), window(1008, 0.4, 0), window(1512, 0.5, 17), window(2016, 1.5, 0),
                        window(2520, 0.5, None)]}
    gen = forwarding.summary({"inhouse": {}}, rows, 42)["generator"]
    assert (gen["received_streams"], gen["socket_drops"], gen["pacing_p99_ms"]) == (1008, 0, 0.4), gen
    assert gen["streams_per_core"] == 3000.0 and gen["windows"] == 1, gen


def test_the_generator_figure_is_every_window_at_its_top_load_pooled_not_the_best_of_them():
    # at 210 participants: 3 s at 0.5 core and 6 s at 0.7 core in two SFUs' runs, and 3 s at 0.6 core
    # of a third that forwarded 24 streams short; the best window alone would read 5,040 streams per core
    rows = {"inhouse": [window(1008, 0.3, 0), window(2520, 0.25, 0, cores=0.5)],
            "janus": [window(2520, 0.4, 0, cores=0.7, seconds=6.0), window(2520, 1.2, 0, cores=0.9)],
            "medooze": [window(2496, 0.3, 0, cores=0.6, participants=210)]}
    gen = forwarding.summary({s: {} for s in rows}, rows, 42)["generator"]
    assert (gen["windows"], gen["participants"], gen["pacing_p99_ms"]) == (3, 210, 0.4), gen
    stream_seconds = 2520 * 9 + 2496 * 3
    assert abs(gen["received_streams"] - stream_seconds / 12) < 1e-6, gen
    assert abs(gen["streams_per_core"] - stream_seconds / (3 * 0.5 + 6 * 0.7 + 3 * 0.6)) < 1e-6, gen
    none = forwarding.summary({"inhouse": {}}, {"inhouse": [window(1008, 1.5, 0)]}, 42)["generator"]
    assert none["streams_per_core"] is None and none["windows"] == 0, none


def test_each_codec_is_set_beside_vp8_against_the_same_sfu_and_printed():
    """--codec: the generator's sustained streams per core in each codec, and its CPU per received
    stream over VP8's (a codec whose reader costs a quarter more reads 1.25); a codec that sustained
    no window has no ratio."""
    by_codec = {"vp8": [window(1008, 0.3, 0), window(2016, 0.4, 0)],
                "h264": [window(1008, 0.3, 0, cores=1008 / 2400), window(2016, 0.6, 0, cores=2016 / 2400)],
                "av1": [window(1008, 1.3, 0)]}
    result = forwarding.summary({"inhouse": {}}, {"inhouse": by_codec["vp8"]}, 42, by_codec)
    codecs = result["generator"]["codecs"]
    assert list(codecs) == ["vp8", "h264", "av1"]
    assert codecs["vp8"]["cost_vs_vp8"] == 1.0 and codecs["vp8"]["participants"] == 168, codecs
    assert abs(codecs["h264"]["streams_per_core"] - 2400) < 1e-9 and abs(codecs["h264"]["cost_vs_vp8"] - 1.25) < 1e-9
    assert codecs["av1"]["streams_per_core"] is None and codecs["av1"]["cost_vs_vp8"] is None
    combined = forwarding.combined([result, result])
    assert combined["generator"]["codecs"]["h264"]["cost_vs_vp8_runs"] == [1.25, 1.25]


def test_a_codec_the_generator_does_not_send_is_refused_before_any_run(capsys):
    assert forwarding.main(["--codec", "h265"]) == 2
    assert "--codec takes h264, vp9, av1, not h265" in capsys.readouterr().err
    assert forwarding.main(["--sfus", "janus", "--codec", "vp9"]) == 2
    assert "--codec-sfu inhouse is not one of --sfus (janus)" in capsys.readouterr().err


def window(streams, pacing, drops, cores=None, seconds=3.0, participants=None):
    """A generator row as bench/forwarding.py reads it from a run folder (rooms of 7: 12 streams a
    participant)."""
    cores = streams / 3000 if cores is None else cores
    return {"participants": participants or streams // 12, "phase": "ramp", "received_streams": streams, "seconds": seconds,
            "cpu_s": cores * seconds, "cores": cores, "streams_per_core": streams / cores,
            "pacing_ms_p99": pacing, "socket_drops": drops}


def test_a_count_whose_sfu_carried_more_than_media_is_left_out_of_its_cost():
    """The synthetic LiveKit participant once lost its session and the SFU's signalling ran at
    1.1 MB/s: that count's cost is the driver's, not the SFU's, and the bench says so."""
    def row(p, signalling_kbps):
        return {"participants": p, "sfu_us_per_packet": 20.0, "sfu_media_in_ratio": 1.1, "sfu_media_out_ratio": 1.1,
                "sfu_signalling_kbps_per_participant": signalling_kbps}
    analysis = SimpleNamespace(health=[{"participants": 14, "client_bound": True}],
                               cost=[row(7, 3255.0), row(14, 2.0), row(21, 2.0)])   # what sfu_cost reads
    assert list(forwarding.sfu_cost(analysis)) == [21]



def test_a_count_whose_sfu_forwarded_under_half_its_usual_packets_is_left_out_of_its_cost():
    """Medooze once forwarded 13 packets/s a stream at 84 participants against 62 at the counts
    before: its 78 µs a forwarded packet there was the CPU of an SFU past its knee, not a cost of
    forwarding, and it made the round's ratio at twice the knee load 0.06."""
    def row(p, pps_per_stream):
        streams = p * 12
        return {"participants": p, "fwd_streams": streams, "fwd_pps": pps_per_stream * streams,
                "sfu_us_per_packet": 14.0, "sfu_media_in_ratio": 1.0, "sfu_media_out_ratio": 1.0}
    cost = [row(70, 62.0), row(77, 61.0), row(84, 13.0), row(91, 40.0)]
    fell = forwarding.forwarding_fell(cost)
    assert list(fell) == [84] and "13 packets/s a stream" in fell[84] and "usual 50 in the run" in fell[84], fell
    analysis = SimpleNamespace(health=[], cost=cost)
    assert list(forwarding.sfu_cost(analysis)) == [70, 77, 91]


def test_an_sfu_whose_sockets_dropped_datagrams_at_a_compared_load_is_said_to_be_at_its_limit(capsys):
    """Medooze's one socket overflowed from 56-77 participants on in the runs of 2026-11-29 (12
    datagrams a second at 84): its cost there is still per packet forwarded, but the bench says so."""
    cost = {"medooze": {42: {"sfu_us_per_packet": 12.0, "sfu_udp_drops": 0.0},
                        84: {"sfu_us_per_packet": 11.5, "sfu_udp_drops": 12.1}},
            "inhouse": {42: {"sfu_us_per_packet": 5.0}, 84: {"sfu_us_per_packet": 5.5, "sfu_udp_drops": 0.0}}}
    result = forwarding.summary(cost, {}, 42)
    medooze = result["sfus"]["medooze"]
    assert (medooze["socket_drops_per_s"], medooze["socket_drops_per_s_2x"]) == (0.0, 12.1), medooze
    assert result["sfus"]["inhouse"]["socket_drops_per_s"] is None   # not counted there
    forwarding.print_summary(result, 42)
    said = [line for line in capsys.readouterr().out.splitlines() if "sockets dropped" in line]
    assert said == ["medooze at 84: its sockets dropped 12.1 datagrams a second for full receive buffers "
                    "(at its limit there; its cost is still per packet it forwarded)"], said

# The layout of `go tool pprof -raw`: samples as location ids leaf first, locations with their
# inlined functions on the lines after.
RAW = """PeriodType: cpu nanoseconds
Period: 10000000
Samples:
samples/count cpu/nanoseconds
          3   30000000: 1 2 3
          1   10000000: 4 2 3
          2   20000000: 5 6
          1   10000000: 7
          1   10000000: 1 8 3
          1   10000000: 5 9 10
Locations
     1: 0x4a M=1 crypto/internal/fips140/aes.encryptBlockAsm /go/src/aes.go:1:0 s=0
     2: 0x4b M=1 github.com/pion/srtp/v3.(*Context).decryptRTP /m/srtp.go:2:0 s=0
     3: 0x4c M=1 sfubench/synth.(*fastConn).media /s/fastpath.go:3:0 s=0
     4: 0x4d M=1 golang.org/x/sys/unix.RawSyscall6 /m/unix.go:4:0 s=0
     5: 0x4e M=1 runtime.memmove /go/src/memmove.s:5:0 s=0
             github.com/pion/rtcp.(*ReceiverReport).Marshal /m/rr.go:6:0 s=0
     6: 0x4f M=1 runtime.gcBgMarkWorker /go/src/mgc.go:7:0 s=0
     7: 0x50 M=1 runtime.gcBgMarkWorker /go/src/mgc.go:8:0 s=0
     8: 0x51 M=1 sfubench/sfu/inhouse/srtpkeys.(*gcm).DecryptRTP /s/gcm.go:9:0 s=0
     9: 0x52 M=1 sfubench/sfu/inhouse/client.(*SentStream).sent /s/sent.go:10:0 s=0
    10: 0x53 M=1 sfubench/synth.(*outbound).write /s/publish.go:11:0 s=0
Mappings
1: 0x400000/0x800000/0x0 /bin/x
"""


def test_a_profile_sample_goes_to_the_part_of_the_work_nearest_its_leaf():
    samples, locations = cpushare.parse(RAW)
    assert [ns for ns, _ in samples] == [30000000, 10000000, 20000000, 10000000, 10000000, 10000000]
    assert locations[5] == ["runtime.memmove", "github.com/pion/rtcp.(*ReceiverReport).Marshal"]
    parts = [cpushare.part_of([fn for loc in stack for fn in locations[loc]]) for _, stack in samples]
    # AES for the SRTP context is SRTP, pion's or ours; a system call is one whoever made it;
    # memmove inlined into RTCP's marshalling is RTCP's; a stack of the runtime alone is the runtime's;
    # a sent packet kept for resending and counted for the reports is feedback, though a publisher asked
    assert parts == ["SRTP", "system calls", "RTCP and feedback", cpushare.RUNTIME, "SRTP", "RTCP and feedback"]
