"""The page contract with real Chromium and no SFU: participant pages that send their fake camera to
themselves over a loopback peer connection, in the real host page, talking to the real collector
through the real page server. What the probe and the sampler report must be what the collector turns
into checks, samples, playback, delay and a health record."""
import json
import time

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.chrome.service import Service

from sfubench import grid
from sfubench.collector import Collector, Window
from sfubench.events import Bus
from sfubench.lab import LocalLab
from sfubench.pages import PageServer
from sfubench.runner import FRAME_FLUSH_S, LEAD_S

# A participant whose "SFU" is a second peer connection in its own page: it publishes its camera and
# microphone and receives them back, naming them as coming from `peer`, the other participant. All
# pages of a browser share its one fake camera, so the other's capture times are this one's too: the
# delay comes out as the loopback's own.
LOOPBACK_PAGE = """<!doctype html><html><head><script src="/probe.js"></script></head><body><script>
(async () => {
  const sb = window.sfubench;
  const local = await navigator.mediaDevices.getUserMedia({audio: true, video: true});
  for (const t of local.getTracks()) sb.addTrack(sb.params.user, t);
  const a = new RTCPeerConnection(), b = new RTCPeerConnection();
  a.onicecandidate = (e) => e.candidate && b.addIceCandidate(e.candidate);
  b.onicecandidate = (e) => e.candidate && a.addIceCandidate(e.candidate);
  b.ontrack = (e) => sb.addTrack(sb.params.peer, e.track);
  // Clones: a received track takes the id of the track sent, and these must not pass for the camera.
  for (const t of local.getTracks()) a.addTrack(t.clone(), local);
  // Offer and answer again, as an SFU's renegotiation does; with `restart`, an ICE restart first.
  window.negotiate = async (restart) => {
    if (restart) a.restartIce();
    await a.setLocalDescription(); await b.setRemoteDescription(a.localDescription);
    await b.setLocalDescription(); await a.setRemoteDescription(b.localDescription);
  };
  await window.negotiate(false);
  sb.setState('joined');
})().catch((e) => window.sfubench.setState('failed', String(e)));
</script></body></html>"""

USERS = ("p1", "p2")
PEER = {"p1": "p2", "p2": "p1"}


@pytest.fixture(scope="module")
def session(local_media, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages")
    (folder / "loopback.html").write_text(LOOPBACK_PAGE)
    bus, records = Bus(), []
    bus.subscribe(lambda stream, r: records.append((stream, r)))
    collector = Collector(bus, local_media, folder / "frames")
    # In the lab's clients namespace, as in a run: nothing but its own loopback and link.
    with LocalLab("sfubp", "127.0.6") as lab, lab.inside_clients(), \
            PageServer("t0ken", collector=collector, mounts={"/test/": folder}) as pages:
        options = grid.chrome_options(local_media.y4m, local_media.wav)
        driver = webdriver.Chrome(service=Service(grid.CHROMEDRIVER), options=options)
        try:
            driver.get(pages.url() + "/host.html")
            lay = local_media.layout
            probe = json.dumps({"code": {"width": lay.width, "height": lay.height, "cell": lay.cell,
                                         "cells": 14, "rows": 2}, "token": "t0ken"})
            for user in USERS:
                collector.add_page(user, 1, 1)
                driver.execute_script("sfubenchHost.add(arguments[0], arguments[1])", user,
                                      f"{pages.url()}/test/loopback.html?room=1&user={user}&peer={PEER[user]}&probe={probe}")
            collector.send({"cmd": "follow", "on": True})
            yield collector, records, folder, driver
        finally:
            driver.quit()


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_pages_join_report_health_and_play(session):
    collector, records, *_ = session
    assert wait_for(lambda: all(collector.pages[u].state == "joined" for u in USERS)), \
        {u: (p.state, p.reason) for u, p in collector.pages.items()}
    for user in USERS:
        assert wait_for(lambda: collector.verdict(user, PEER[user]) == "playing"), \
            collector.verdict(user, PEER[user])
        assert wait_for(lambda: collector.verdict(user, user) == "playing"), collector.verdict(user, user)
    assert collector.verdict("p1", "nobody") == "missing"


def test_a_measurement_is_one_command_and_every_page_answers_on_time(session):
    collector, records, *_ = session
    assert wait_for(lambda: all(collector.verdict(u, PEER[u]) == "playing" for u in USERS))
    at = time.time() + LEAD_S
    w = collector.open_window(Window("target", 7, 3, 1.0, 2, at, frozenset(USERS)))
    collector.send({"cmd": "measure", "phase": "target", "window": 7, "n": 3, "interval": 1.0,
                    "at": round(at * 1000), "participants": 2, "record": 2.0})
    assert wait_for(lambda: w.complete, timeout=10)
    time.sleep(FRAME_FLUSH_S)
    health = collector.close_window(w)
    assert health["missing_samples"] == 0 and health["expected"] == 2
    assert health["duration_s"] < 2 + 1.0, health            # 3 samples 1 s apart
    samples = [r for s, r in records if s == "samples" and r["window"] == 7]
    assert {(s["user"], s["direction"], s["kind"], s["peer"]) for s in samples} == {
        (u, d, k, PEER[u] if d == "recv" else None) for u in USERS for d in ("send", "recv")
        for k in ("audio", "video")}
    assert all(s["phase"] == "target" and s["participants"] == 2 and s["room"] == 1 for s in samples)
    video = [s for s in samples if s["kind"] == "video" and s["direction"] == "send"]
    assert all("qualityLimitationReason" in s for s in video)
    # Received audio comes with what its jitter buffer played out, advancing from sample to sample
    # (48,000 samples a second); no other stream carries those fields.
    for user in USERS:
        heard = sorted((s for s in samples if s["user"] == user and s["kind"] == "audio" and s["direction"] == "recv"),
                       key=lambda s: s["t"])
        played = heard[-1]["totalSamplesReceived"] - heard[0]["totalSamplesReceived"]
        assert 0.8 * 48 * (heard[-1]["t"] - heard[0]["t"]) < played, heard
        assert heard[-1]["jitterBufferEmittedCount"] > 0 and heard[-1]["concealedSamples"] is not None, heard[-1]
        assert heard[-1]["jitterBufferMinimumDelay"] is not None, heard[-1]   # what lip sync held
    assert not any("totalSamplesReceived" in s for s in samples if s["kind"] == "video" or s["direction"] == "send")
    playback = [r for s, r in records if s == "playback" and r["window"] == 7]
    assert {(p["user"], p["peer"]) for p in playback} == set(PEER.items())
    for p in playback:
        assert p["decoded"] >= 0.95 * p["frames"] > 0
        assert p["effective_fps"] > 0.8 * collector.media.fps
        # A loopback pair: no network, no jitter buffer to speak of.
        assert p["delays"] > 0.9 * p["frames"] and -20 < p["delay_ms"] < 150, p
    (windows,) = [r for s, r in records if s == "windows" and r["window"] == 7]
    assert windows is health


def test_captured_frames_are_saved_with_their_code(session):
    collector, records, folder, _ = session
    for user in USERS:
        collector.send({"cmd": "capture", "phase": "target", "window": 9, "count": 2, "gap_ms": 300,
                        "peers": [PEER[user]], "participants": 2}, [user])
    assert wait_for(lambda: collector.captured[9] >= 4, timeout=15)
    index = [r for s, r in records if s == "frames" and r["window"] == 9]
    assert len(index) == 4 and all(r["peer"] == PEER[r["user"]] and r["participants"] == 2 for r in index)
    assert all(isinstance(r["code"], int) for r in index), index
    assert all((folder / "frames" / r["frame"]).stat().st_size > 10_000 for r in index)


def test_a_page_records_what_it_hears_and_its_microphone_in_a_window(session):
    """The measurement above asked for 2 s of audio: each page posted its microphone's and what it
    heard of its peer, 16 kHz PCM (what the scorers take), begun within the window's first second; what it heard is speech
    (not the silence of a recorder that got nothing)."""
    import wave

    import numpy as np
    collector, records, folder, _ = session
    assert wait_for(lambda: len([r for s, r in records if s == "audio" and r["window"] == 7]) >= 4, timeout=15)
    got = {(r["user"], r["peer"]): r for s, r in records if s == "audio" and r["window"] == 7}
    assert set(got) == {(u, p) for u in USERS for p in (u, PEER[u])}
    opened = min(r["t"] for r in got.values())
    for r in got.values():
        assert (r["rate"], r["samples"], r["participants"]) == (16000, 32000, 2), r
        assert r["t"] - opened < 1000, r
        with wave.open(str(folder / "audio" / r["file"])) as f:
            pcm = np.frombuffer(f.readframes(f.getnframes()), "<i2") / 32768.0
        assert np.sqrt(np.mean(pcm ** 2)) > 0.005, (r["file"], float(np.sqrt(np.mean(pcm ** 2))))


def test_an_ice_restart_is_counted_once_per_peer_connection_and_a_renegotiation_is_not(session):
    """A real ICE restart in Chromium: p1's page renegotiates its pair of peer connections, which
    counts nothing, then restarts ICE on one of them, which gives both new ufrags once the offer and
    answer settle: one `ice_restart` event each, p1's; and the media plays on."""
    collector, records, _, driver = session
    restarts = lambda: [r for s, r in records if s == "events" and r["event"] == "ice_restart"]
    assert wait_for(lambda: collector.verdict("p1", "p2") == "playing")
    frame = driver.find_element(By.CSS_SELECTOR, 'iframe[data-participant="p1"]')
    driver.switch_to.frame(frame)
    try:
        driver.execute_async_script("window.negotiate(false).then(arguments[0])")
        time.sleep(1)
        assert not restarts()
        driver.execute_async_script("window.negotiate(true).then(arguments[0])")
    finally:
        driver.switch_to.default_content()
    assert wait_for(lambda: len(restarts()) >= 2, timeout=10), restarts()
    time.sleep(1)
    assert [r["user"] for r in restarts()] == ["p1", "p1"], restarts()
    assert wait_for(lambda: collector.verdict("p1", "p2") == "playing")
