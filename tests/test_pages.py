"""The engine's web server over real HTTP: what it serves, what it refuses, and the collector's side
of the page contract (commands ride on the answer to a page's health record)."""
import http.client
import io
import json
import secrets
import socket
import time
import urllib.error
import urllib.request

import pytest
from PIL import Image

from sfubench.agent import TOKEN_HEADER
from sfubench.collector import Collector, Window
from sfubench.events import Bus
from sfubench.pages import PageServer

direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
TOKEN = secrets.token_urlsafe(16)   # the run's, as random as a run's


def request(url, body=None, token=TOKEN):
    headers = {TOKEN_HEADER: token} if token is not None else {}
    try:
        with direct.open(urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                                headers=headers), timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def png(w, h):
    b = io.BytesIO()
    Image.new("RGB", (w, h)).save(b, format="PNG")
    return b.getvalue()


@pytest.fixture
def server(local_media, tmp_path):
    bus, records = Bus(), []
    bus.subscribe(lambda stream, r: records.append((stream, r)))
    collector = Collector(bus, local_media, tmp_path / "frames")
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "lib.js").write_text("// bundled")
    with PageServer(TOKEN, collector=collector, mounts={"/lib/": tmp_path / "extra"}) as pages:
        yield pages.url(), collector, records


def test_serves_the_probe_the_pages_and_extra_mounts_and_nothing_outside(server):
    url, _, _ = server
    assert request(url + "/probe.js")[0] == 200
    assert request(url + "/sampler.js")[0] == 200
    assert request(url + "/sfu/janus/client.html")[0] == 200
    assert request(url + "/lib/lib.js") == (200, b"// bundled")
    assert request(url + "/sfu/../../../etc/passwd")[0] == 404
    assert request(url + "/sfu/%2e%2e/%2e%2e/pyproject.toml")[0] == 404


def test_commands_wait_for_the_pages_next_health_record(server):
    url, collector, records = server
    collector.add_page("r1u1", 1, 1)
    collector.send({"cmd": "follow", "on": True})
    health = json.dumps({"type": "health", "user": "r1u1", "lag_max_ms": 3, "lag_mean_ms": 1}).encode()
    assert json.loads(request(url + "/collect", health)[1]) == [{"cmd": "follow", "on": True}]
    assert json.loads(request(url + "/collect", health)[1]) == []
    state = json.dumps({"type": "state", "user": "r1u1", "state": "joined"}).encode()
    assert request(url + "/collect", state)[0] == 200
    assert [r["event"] for s, r in records if s == "events"] == ["participant_joined"]


def test_bad_posts_are_refused_and_strangers_ignored(server):
    url, collector, records = server
    assert request(url + "/collect", b"{not json")[0] == 400
    assert request(url + "/collect", b"[1, 2]")[0] == 400
    assert request(url + "/nowhere", b"{}")[0] == 404
    stranger = json.dumps({"type": "samples", "user": "nobody", "window": 1, "samples": [{}]}).encode()
    assert json.loads(request(url + "/collect", stranger)[1]) == []
    assert records == []


def test_late_samples_count_as_missing(server):
    url, collector, records = server
    collector.add_page("r1u1", 1, 1)
    w = collector.open_window(Window("target", 3, 2, 1.0, 1, 0.0, frozenset(["r1u1"])))
    sample = {"type": "samples", "user": "r1u1", "phase": "target", "window": 3, "i": 0, "took_ms": 12.0,
              "samples": [{"t": 1, "direction": "send", "kind": "video", "bytes": 10}]}
    request(url + "/collect", json.dumps(sample).encode())
    health = collector.close_window(w)
    request(url + "/collect", json.dumps(dict(sample, i=1)).encode())   # after the close: dropped
    assert health["missing_samples"] == 1 and health["stats_ms_p50"] == 12.0
    samples = [r for s, r in records if s == "samples"]
    assert len(samples) == 1 and samples[0]["user"] == "r1u1" and samples[0]["participants"] == 1


def test_streams_from_a_participant_that_left_or_from_its_session_before_it_rejoined_are_dropped(server):
    url, collector, records = server
    for user in ("r1u1", "r1u2"):
        collector.add_page(user, 1, None, kind="synthetic")

    def received(window, *ssrcs):
        w = collector.open_window(Window("ramp", window, 1, 1.0, 2, 0.0, frozenset(["r1u1"])))
        collector.collect({"type": "samples", "user": "r1u1", "window": window, "samples": [
            {"t": 1, "direction": "recv", "kind": "video", "peer": "r1u2", "ssrc": ssrc, "bytes": 0} for ssrc in ssrcs]})
        collector.close_window(w)
        return [r["ssrc"] for s, r in records if s == "samples" and r["window"] == window]

    assert received(1, 11) == [11]
    collector.leave("r1u2")
    assert received(2, 11) == []          # its receiver still reports it: it carries nothing
    time.sleep(0.01)
    collector.add_page("r1u2", 1, None, kind="synthetic")   # joins again: a new session, a new stream
    assert received(3, 11, 12) == [12]


def test_a_generator_batch_reaches_each_participant_and_gets_their_commands(server):
    url, collector, records = server
    for user in ("r1u1", "r1u2"):
        collector.add_page(user, 1, None, kind="synthetic")
    collector.send({"cmd": "measure", "window": 2}, users=["r1u2"])
    batch = {"type": "batch", "records": [
        {"type": "state", "user": "r1u1", "state": "joined"},
        {"type": "health", "user": "r1u1", "lag_max_ms": 1},
        {"type": "health", "user": "r1u2", "lag_max_ms": 1},
        {"type": "batch", "records": [{"type": "state", "user": "r1u2", "state": "joined"}]},   # not nested
        "junk", {"type": "state", "user": "nobody", "state": "joined"}]}
    status, body = request(url + "/collect", json.dumps(batch).encode())
    assert status == 200 and json.loads(body) == {"r1u2": [{"cmd": "measure", "window": 2}]}
    joined = [r["user"] for s, r in records if s == "events" and r["event"] == "participant_joined"]
    assert joined == ["r1u1"]


def test_the_generators_pacing_error_lands_in_the_windows_open_at_the_time(server):
    url, collector, _ = server
    collector.add_page("r1u1", 1, None, kind="synthetic")
    w = collector.open_window(Window("target", 1, 1, 1.0, 1, 0.0, frozenset(["r1u1"])))
    # µs late -> how many sends: 98 on time, one 3 ms late, one 40 ms late
    pacing = {"type": "generator", "pacing_us": [[0, 98], [3000, 1], [40000, 1], [-5, 1], ["x", 1]]}
    request(url + "/collect", json.dumps(pacing).encode())
    health = collector.close_window(w)
    assert health["pacing_ms_p99"] == 3.0 and health["pacing_ms_max"] == 40.0
    after = collector.close_window(collector.open_window(Window("target", 2, 1, 1.0, 1, 0.0, frozenset(["r1u1"]))))
    assert after["pacing_ms_p99"] is None and after["pacing_ms_max"] is None


def test_a_known_frame_code_is_taken_as_sent_and_an_impossible_one_ignored(server, local_media):
    _, collector, _ = server
    collector.add_page("r1u1", 1, None, kind="synthetic")
    blank = [0.0] * 64
    t = 1_000_000.0
    collector.collect({"type": "frames", "user": "r1u1", "series": {"r1u2": [
        [t, blank, None, 17], [t + 66, blank, None, local_media.frames], [t + 132, None, None, "17"]]}})
    codes = [code for _, code, _ in collector.pages["r1u1"].frames["r1u2"]]
    assert codes[0] == 17 and codes[1] != local_media.frames and codes[2] is None


def test_a_captured_frame_is_kept_only_with_safe_names_and_a_bounded_size(server, tmp_path):
    """/frame makes a file name of the query's values and decodes the pixels: a name that is not one
    (a path, a dot-dot), a window that is not a number or an image larger than any source is dropped,
    and nothing lands outside frames/."""
    url, collector, records = server
    collector.add_page("r1u1", 1, 1)
    small = png(64, 36)
    base = "user=r1u1&phase=target&participants=2&read=1000"
    for query in ("peer=..%2F..%2Fx&window=3&i=0", "peer=r1u2&window=..&i=0", "peer=r1u2&window=3&i=-1",
                  "peer=r1u2%2Fa&window=3&i=0"):
        assert request(f"{url}/frame?{base}&{query}", small)[0] in (200, 204, 400), query
    huge = png(5000, 4000)   # 20 Mpixels: past the bound, though a valid PNG
    request(f"{url}/frame?{base}&peer=r1u2&window=3&i=1", huge)
    assert not [r for s, r in records if s == "frames"]
    assert not (tmp_path / "frames").exists() or not list((tmp_path / "frames").iterdir())
    assert not list(tmp_path.parent.glob("x*"))
    request(f"{url}/frame?{base}&peer=r1u2&window=3&i=2", small)
    assert [r["frame"] for s, r in records if s == "frames"] == ["w3-r1u1-r1u2-2.png"]
    assert (tmp_path / "frames" / "w3-r1u1-r1u2-2.png").read_bytes() == small


def test_a_recording_is_kept_as_a_wav_only_with_safe_names_a_known_rate_and_a_bounded_length(server, tmp_path):
    """/audio: a page's recording of what it heard (or of its microphone), 16-bit PCM. A name that is
    not one, a rate no page records at, an odd or over-long body is dropped; a good one is a WAV in
    audio/ with the epoch time of its first sample in the index."""
    import wave
    url, collector, records = server
    collector.add_page("r1u1", 1, 1)
    second = (b"\x01\x00" * 48_000)
    base = "user=r1u1&phase=target&participants=2&window=3"
    for query in ("peer=..%2Fx&rate=48000&t0=1000.5", "peer=r1u2&rate=12345&t0=1000.5", "peer=r1u2&rate=48000&t0=nan",
                  "peer=r1u2&rate=48000&t0=x"):
        assert request(f"{url}/audio?{base}&{query}", second)[0] in (200, 400), query
    request(f"{url}/audio?{base}&peer=r1u2&rate=48000&t0=1000.5", second + b"\x00")       # half a sample
    request(f"{url}/audio?{base}&peer=r1u2&rate=16000&t0=1000.5", b"\x00\x00" * 16_000 * 61)   # past 60 s
    assert not [r for s, r in records if s == "audio"] and not (tmp_path / "audio").exists()
    request(f"{url}/audio?{base}&peer=r1u2&rate=48000&t0=1000.5", second)
    (rec,) = [r for s, r in records if s == "audio"]
    assert (rec["file"], rec["t"], rec["rate"], rec["samples"], rec["window"]) == ("w3-r1u1-r1u2.wav", 1000.5, 48000,
                                                                                    48000, 3)
    with wave.open(str(tmp_path / "audio" / rec["file"])) as f:
        assert (f.getframerate(), f.getnframes(), f.readframes(1)) == (48000, 48000, b"\x01\x00")


def test_connections_beyond_the_bound_are_closed_and_the_rest_still_served(local_media, tmp_path):
    collector = Collector(Bus(), local_media, tmp_path / "frames")
    with PageServer(TOKEN, collector=collector, max_connections=3) as pages:
        host, port = pages.httpd.server_address[:2]
        idle = [socket.create_connection((host, port), timeout=5) for _ in range(3)]   # hold every slot
        extra = socket.create_connection((host, port), timeout=5)
        assert extra.recv(1) == b""   # closed at once, nothing served
        extra.close()
        for s in idle:
            s.close()
        deadline = time.monotonic() + 5
        while not served(pages.url() + "/probe.js"):   # slots come back as the idle ones end
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_request_trickled_a_byte_at_a_time_is_cut_at_its_deadline(local_media, tmp_path, monkeypatch):
    """A peer that keeps sending header lines, each within the socket's timeout, never finishing its
    request: the connection is cut once the request has taken REQUEST_S, unserved, and the server
    serves the next as ever (an idle kept-alive connection is not timed: its request has not begun)."""
    from sfubench import agent
    monkeypatch.setattr(agent, "REQUEST_S", 1.5)
    collector = Collector(Bus(), local_media, tmp_path / "frames")
    with PageServer(TOKEN, collector=collector) as pages:
        host, port = pages.httpd.server_address[:2]
        idle = socket.create_connection((host, port), timeout=10)
        slow = socket.create_connection((host, port), timeout=10)
        slow.sendall(b"GET /probe.js HTTP/1.1\r\nHost: x\r\n")
        started, cut = time.monotonic(), None
        while time.monotonic() - started < 6:
            try:
                slow.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.3)
            except OSError:
                cut = time.monotonic() - started
                break
        if cut is None:   # the send side may not notice: the read side must see the end
            slow.settimeout(1)
            assert slow.recv(1) == b"", "the trickled request was served or kept"
            cut = time.monotonic() - started
        assert 1.0 < cut < 4.5, cut
        slow.close()
        idle.sendall(b"GET /probe.js HTTP/1.1\r\nHost: x\r\n\r\n")   # idle 3+ s, then one whole request
        assert idle.recv(12).startswith(b"HTTP/1.1 200"), "an idle connection's first request was cut"
        idle.close()


def served(url) -> bool:
    try:
        return request(url)[0] == 200
    except (OSError, http.client.HTTPException):   # closed at once: no slot free yet
        return False


def test_forged_posts_without_the_runs_token_are_refused_and_leave_no_trace(local_media, tmp_path):
    """A post without the token, or with another, is refused with 403 before its body is read: no
    participant fails, no sample or frame is recorded, nothing is written to the run folder."""
    bus, records = Bus(), []
    bus.subscribe(lambda stream, r: records.append((stream, r)))
    run = tmp_path / "run"
    run.mkdir()
    collector = Collector(bus, local_media, run / "frames")
    collector.add_page("r1u1", 1, 1)
    forged_state = json.dumps({"type": "state", "user": "r1u1", "state": "failed", "reason": "forged"}).encode()
    frame = "user=r1u1&peer=r1u2&phase=target&window=1&participants=2&i=0&read=1000"
    with PageServer(TOKEN, collector=collector) as pages:
        url = pages.url()
        for token in (None, "", "the-runs-tokem", TOKEN + "x"):
            assert request(url + "/collect", forged_state, token=token)[0] == 403, token
            assert request(f"{url}/frame?{frame}", png(64, 36), token=token)[0] == 403, token
        # a body announced but never sent does not hold the refusal up
        with socket.create_connection(pages.httpd.server_address[:2], timeout=5) as s:
            s.sendall(b"POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
            assert s.recv(64).split(b" ")[1] == b"403"
        assert request(url + "/probe.js", token=None)[0] == 200   # the project's own files stay open
    assert records == []
    assert collector.pages["r1u1"].state != "failed"
    assert list(run.rglob("*")) == []
