"""Synthetic participants for real: sfubench-synth joins each local SFU through that SFU's driver, in
a room with a real Chromium participant. The browser must decode the synthetic streams (the frame
code the clip carries, so its checks, playback and delay work on them); the synthetic receivers must
count the browser's frames and recognise each other's; and the until-knee shape must stop a ramp
at an SFU's knee.

`make test` covers Janus's driver; `make test-sfus` every other local adapter's.
"""
import json
import sys
import time
import urllib.request

import pytest

from reports import metrics, runfiles, traffic
from sfubench import config, loadtest
from sfubench.config import LAB_SFU_CORES
from sfubench.progress import Progress
from sfubench.rundir import read
from sfubench.sfu import Adapter, _jwt, secret_variable

from support.scenarios import leave_and_rejoin
from support.tiers import full, tiered

WITH_DRIVER = tuple(n for n in config.available_sfus()
                    if "local" in Adapter.load(n).where and Adapter.load(n).synthetic_driver)
PREFIX, SUBNET = "sfubs", "127.0.7"

pytestmark = pytest.mark.e2e


def settings(sfu, out, **more):
    return config.load(cli={"sfu": sfu, "preset": "browsers", "out": str(out), "background_interval": 0, "lab_prefix": PREFIX,
                            "lab_subnet": SUBNET, "results_db": str(out / "results.sqlite"), **more}, env={})


@pytest.fixture(scope="module", params=tiered(WITH_DRIVER, core=("janus",)))
def mixed(request, tmp_path_factory):
    """One room of three joining a second apart: r1u1 in Chromium, r1u2 and r1u3 synthetic; r1u3
    leaves and rejoins."""
    out = tmp_path_factory.mktemp(request.param)
    cfg = settings(request.param, out, users_per_room=3, real_per_room=1, quality_frames=1, join_interval=1)
    # r1u3, a synthetic participant, leaves and rejoins: everyone renegotiates through the driver
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout), leave_and_rejoin("r1u3", pause_s=2, target_samples=4))
    return request.param, run_dir, status


def test_the_run_completes_with_a_synthetic_process_of_the_clients(mixed):
    sfu, run_dir, status = mixed
    assert status == "ok", (run_dir / "meta.json").read_text()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["clients"]["synthetic"]["driver"] == Adapter.load(sfu).synthetic_driver
    started = [e for e in read(run_dir, "events") if e["event"] == "participant_started"]
    assert [(e["user"], e.get("client")) for e in started] == [
        ("r1u1", None), ("r1u2", "synthetic"), ("r1u3", "synthetic")]
    gaps = [(b["t"] - a["t"]) / 1000 for a, b in zip(started, started[1:])]
    assert all(1 <= g < 3 for g in gaps), gaps   # --join-interval 1


def test_the_sfu_carries_the_media_and_little_signalling(mixed):
    """What the SFU received and sent is the media its participants count, within the band, and its
    signalling is small: a synthetic driver that floods the signalling (LiveKit's once re-offered
    after every answer, 1.8 Mbit/s a participant) measures itself, not the SFU."""
    _, run_dir, _ = mixed
    cost = metrics.analyse(runfiles.load(run_dir)).cost
    assert cost and all(r.get("sfu_media_in_mbps") and r.get("sfu_signalling_kbps") is not None for r in cost), cost
    assert traffic.anomalies(cost) == [], cost


def test_every_video_plays_for_browser_and_synthetic_viewers_before_and_after_a_rejoin(mixed):
    _, run_dir, _ = mixed
    checks = read(run_dir, "checks")
    users = ("r1u1", "r1u2", "r1u3")
    assert len(checks) == 2 * 9, checks
    for round_ in (checks[:9], checks[9:]):
        seen = {(c["user"], c["peer"]): (c["client"], c["ok"], c["verdict"]) for c in round_}
        assert set(seen) == {(u, p) for u in users for p in users}
        assert all(ok for _, ok, _ in seen.values()), seen
        assert {client for client, _, _ in seen.values()} == {"browser", "synthetic"}
        # The synthetic viewers' check of the browser's video: frames they cannot decode, told apart.
        assert seen[("r1u2", "r1u1")] == ("synthetic", True, "playing")
    events = [e["event"] for e in read(run_dir, "events")]
    assert events.index("participant_left") < events.index("participant_rejoined")


def test_the_browser_decodes_the_frame_codes_of_synthetic_streams(mixed):
    _, run_dir, _ = mixed
    rows = [r for r in read(run_dir, "playback") if r["phase"] == "target" and r["user"] == "r1u1"]
    assert {r["peer"] for r in rows} == {"r1u2", "r1u3"}
    for r in rows:
        assert r["peer_client"] == "synthetic" and r["decoded"] == r["frames"] > 0, r
        assert r["effective_fps"] >= 10, r          # of the clip's 15
        assert r["delay_ms"] is not None and 0 <= r["delay_ms"] < 500, r
    captured = [f for f in read(run_dir / "frames", "index") if f["user"] == "r1u1"]
    assert captured and all(f["code"] is not None for f in captured), captured


def test_synthetic_receivers_count_the_browsers_frames_and_recognise_each_other(mixed):
    _, run_dir, _ = mixed
    samples = [s for s in read(run_dir, "samples") if s["phase"] == "target"]
    assert {s["client"] for s in samples if s["user"] == "r1u2"} == {"synthetic"}
    assert {s["client"] for s in samples if s["user"] == "r1u1"} == {"browser"}
    from_browser = sorted((s for s in samples if s["user"] == "r1u2" and s["peer"] == "r1u1"
                           and s["kind"] == "video"), key=lambda s: s["t"])
    first, last = from_browser[0], from_browser[-1]
    seconds = (last["t"] - first["t"]) / 1000
    assert seconds > 2
    assert last["framesReceived"] - first["framesReceived"] >= 0.6 * 15 * seconds, (first, last)
    assert last["bytes"] > first["bytes"] and last["frameWidth"] == 320
    between = [r for r in read(run_dir, "playback") if r["phase"] == "target" and r["user"] == "r1u2"
               and r["peer"] == "r1u3"]
    assert between and between[0]["decoded"] > 0 and between[0]["delay_ms"] is not None, between
    # A synthetic viewer has no playback of a browser's video: it cannot read its codes.
    assert not [r for r in read(run_dir, "playback") if r["user"] == "r1u2" and r["peer"] == "r1u1"]


def test_synthetic_receivers_play_out_the_audio_they_get_through_a_model(mixed):
    """Every participant's received audio, the synthetic ones' from their jitter buffer's model
    (synth/receive.go), gives what the report's Audio section needs, and on a plain link next to
    nothing concealed: the browser's and the model's figures side by side."""
    _, run_dir, _ = mixed
    a = metrics.analyse(runfiles.load(run_dir))
    heard = [o for o in a.audio if o["phase"] == "target" and o["direction"] == "recv"]
    assert {o["client"] for o in heard} == {"browser", "synthetic"}
    for o in heard:
        played = o["playout"]
        assert played["totalSamplesReceived"] > 0 and played["jitterBufferEmittedCount"] > 0, (o["user"], played)
        assert played["concealedSamples"] <= 0.02 * played["totalSamplesReceived"], (o["user"], o["peer"], played)
    # a synthetic receiver's samples carry its own audio's round trip, once its SFU's receiver reports
    # gave one (r1u3 has just joined again: not necessarily yet)
    assert all(o["rtt"] for o in heard if o["user"] == "r1u2"), [(o["peer"], o["rtt"]) for o in heard]
    table = json.loads((run_dir / "tables.json").read_text())["tables"]["audio"]
    assert table["rows"] and "estimates" in table["note"]


def test_the_generator_reports_its_pacing(mixed):
    _, run_dir, _ = mixed
    windows = [w for w in read(run_dir, "windows") if w["phase"] == "target"]
    assert windows and windows[0]["pacing_ms_p99"] is not None
    # Every stream the SFU sends has its section (mediasoup's probation stream too): none arrives
    # that the client would drop for want of a codec, as pion logs it.
    assert "codec not found" not in (run_dir / "synth.log").read_text()
    report = (run_dir / "report.html").read_text()
    assert "Receivers by kind" in report and "per forwarded stream and packet" in report


# every codec but VP8 (the default mix's) that each driver negotiates
OTHER_CODECS = tuple((n, c) for n in WITH_DRIVER for c in Adapter.load(n).synthetic_codecs if c != "vp8")
# each picture's size as the browser sends a 320x180 camera, read from its bitstream
SIZE_READ = {"h264": "sequence parameter set", "vp9": "keyframe header", "av1": "sequence header"}


@pytest.mark.parametrize("sfu,codec", tiered(OTHER_CODECS, core=(("janus", "h264"),)))
def test_synthetic_participants_send_and_read_each_codec_as_a_browser_does(sfu, codec, tmp_path):
    """--codec in the default mix: a room of three, r1u1 in Chromium, r1u2 and r1u3 synthetic.
    Every video stream sent and received, browser or synthetic, is in the codec asked for (each
    sample's codec); every video plays; the browser decodes the synthetic streams' frame codes, and
    the synthetic receivers recognise each other's frames and read the browser's picture size from
    its bitstream (SIZE_READ)."""
    cfg = settings(sfu, tmp_path, users_per_room=3, real_per_room=1, quality_frames=1, codec=codec)
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout))
    assert status == "ok", (run_dir / "meta.json").read_text()
    samples = [s for s in read(run_dir, "samples") if s["phase"] == "target" and s["kind"] == "video"]
    streams = {(s["user"], s["peer"], s["direction"], s["client"]): s.get("codec") for s in samples}
    assert {client for *_, client in streams} == {"browser", "synthetic"}
    assert len([k for k in streams if k[2] == "recv"]) == 6 and set(streams.values()) == {codec}, streams
    checks = read(run_dir, "checks")
    assert len(checks) == 9 and all(c["ok"] for c in checks), checks
    played = {(r["user"], r["peer"]): r for r in read(run_dir, "playback") if r["phase"] == "target"}
    for user, peer in (("r1u1", "r1u2"), ("r1u1", "r1u3"), ("r1u2", "r1u3"), ("r1u3", "r1u2")):
        r = played[(user, peer)]
        assert r["decoded"] > 0 and r["delay_ms"] is not None and r["effective_fps"] >= 10, r
    from_browser = [s for s in samples if s["user"] == "r1u2" and s["peer"] == "r1u1" and s["direction"] == "recv"]
    assert from_browser and from_browser[-1]["framesReceived"] > 0, from_browser
    assert from_browser[-1]["frameWidth"] == 320, (SIZE_READ[codec], from_browser[-1])


def test_until_knee_stops_one_step_past_the_knee(tmp_path):
    """The lab's link to the clients carries 5.5 Mbit/s: one room of three (about 3.8 Mbit/s of
    video to its receivers) passes, two do not, and no more rooms ever will: the knee is at 6
    participants. The ramp must find it, confirm it with the next room and stop there, far below
    its cap. (A starved SFU made a knee too, but not always at one count, and twice, starved of
    CPU, it stopped answering its health check: a crash to the engine, not a knee. A dropped
    publisher is a sixth of two rooms' streams but only a ninth of three's: no sustained knee.)"""
    link = tmp_path / "narrow.toml"
    link.write_text("[down]\nrate_kbps = 7000\nqueue_ms = 400\n")
    cfg = settings("inhouse", tmp_path, shape="until-knee", max_rooms=8, users_per_room=3, real_rooms=0,
                   network=str(link), quality_frames=0, video_timeout=8, target_samples=2,
                   sfu_cpus=LAB_SFU_CORES,   # the link, not a budget sized here, is the limit
                   knee_resolution=3)        # a room: the known answer is the room's step
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout))
    assert status == "ok"
    a = metrics.analyse(runfiles.load(run_dir))
    assert a.knee.participants == 6 and not a.knee.client_bound, a.knee
    rooms = max(e["room"] for e in read(run_dir, "events") if e["event"] == "room_started")
    assert rooms == a.knee.participants // 3 + 1 < 8
    reached = [e for e in read(run_dir, "events") if e["event"] == "target_reached"]
    assert reached and reached[0]["reason"].startswith(f"knee at {a.knee.participants} participants")


# Known credentials, so a test can sign the admin token LiveKit's server API takes.
LIVEKIT_KEY, LIVEKIT_SIGNING = ("sfubench-test-key", "sfubench-test-signing-0123456789abcdef")


@pytest.fixture
def livekit_admin(monkeypatch):
    """The run's LiveKit takes the known credentials; call(runner, method, body) asks its RoomService."""
    monkeypatch.setenv(secret_variable("livekit", "api_key"), LIVEKIT_KEY)
    monkeypatch.setenv(secret_variable("livekit", "api_secret"), LIVEKIT_SIGNING)

    def call(runner, method: str, body: dict) -> dict:
        server = runner.client_params(1, "r1u1")["server"].replace("ws://", "http://")
        now = int(time.time())
        grant = {"room": "1", "roomAdmin": True, "roomCreate": True}
        admin = _jwt({"iss": LIVEKIT_KEY, "nbf": now - 60, "exp": now + 600, "video": grant}, LIVEKIT_SIGNING)
        request = urllib.request.Request(f"{server}/twirp/livekit.RoomService/{method}", json.dumps(body).encode(),
                                         {"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(request, timeout=10).read() or b"{}")
    return call


@full   # LiveKit's build is `make test-sfus`'s
def test_a_synthetic_participant_its_sfu_removes_is_failed_with_the_reason(tmp_path, livekit_admin):
    """LiveKit removes r1u2 through its own server API (RoomService.RemoveParticipant) once the room
    plays: the run records the participant failed with what its driver was told, where it had only
    missing videos to go by (a CI run lost a synthetic participant that way, silently)."""
    def remove_r1u2(runner) -> None:
        runner.status.rooms = 1
        runner.event("room_started", room=1)
        while runner.status.participants < 3:
            runner.start_participant(1)
        runner.validate(1)
        livekit_admin(runner, "RemoveParticipant", {"room": "1", "identity": "r1u2"})
        deadline = time.monotonic() + 15
        while runner.collector.pages["r1u2"].state != "failed" and time.monotonic() < deadline:
            runner.wait(0.5)

    cfg = settings("livekit", tmp_path, users_per_room=3, real_per_room=0, quality_frames=0, video_timeout=30)
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout), remove_r1u2)
    assert status == "ok", (run_dir / "meta.json").read_text()
    failed = [e for e in read(run_dir, "events") if e["event"] == "participant_failed"]
    assert [e["user"] for e in failed] == ["r1u2"], failed
    assert failed[0]["reason"].startswith("livekit: the session ended: the server asked the participant to leave"), failed


@full
def test_videos_to_and_from_a_participant_that_failed_are_not_waited_for(tmp_path, livekit_admin):
    """LiveKit's room 1 is made for two (RoomService.CreateRoom, max_participants 2), so the last to
    join is refused: the room's validation gives up the videos to and from it as soon as the others
    play (none of its can), not after --video-timeout. (A room that a saturated SFU cannot take
    whole is how a ramp's last step goes: the wait was a minute of every such run.)"""
    def room_for_two(runner) -> None:
        livekit_admin(runner, "CreateRoom", {"name": "1", "max_participants": 2})
        runner.status.rooms = 1
        runner.event("room_started", room=1)
        while runner.status.participants < 3:
            runner.start_participant(1)
        runner.validate(1)

    cfg = settings("livekit", tmp_path, users_per_room=3, real_per_room=0, quality_frames=0, video_timeout=30)
    run_dir, status = loadtest.run(cfg, Progress(sys.stdout), room_for_two)
    assert status == "ok", (run_dir / "meta.json").read_text()
    failed = [e["user"] for e in read(run_dir, "events") if e["event"] == "participant_failed"]
    assert len(failed) == 1, failed   # the last to reach the server: they join at once
    checks = read(run_dir, "checks")
    given_up = {(c["user"], c["peer"]) for c in checks if not c["ok"]}
    assert len(checks) == 9 and given_up == {(a, b) for a in ("r1u1", "r1u2", "r1u3")
                                             for b in ("r1u1", "r1u2", "r1u3") if failed[0] in (a, b)}, checks
    assert max(c["elapsed"] for c in checks) < 15, "the validation waited for videos that could not play"
