"""The engine's web server over real HTTP: what it serves, what it refuses, and the collector's side
of the page contract (commands ride on the answer to a page's health record)."""
import json
import urllib.error
import urllib.request

import pytest

from sfubench.collector import Collector
from sfubench.events import Bus
from sfubench.pages import PageServer

direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def request(url, body=None):
    try:
        with direct.open(urllib.request.Request(url, data=body, method="POST" if body is not None else "GET"),
                         timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


@pytest.fixture
def server(local_media, tmp_path):
    bus, records = Bus(), []
    bus.subscribe(lambda stream, r: records.append((stream, r)))
    collector = Collector(bus, local_media, tmp_path / "frames")
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "lib.js").write_text("// bundled")
    with PageServer(collector=collector, mounts={"/lib/": tmp_path / "extra"}) as pages:
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
    w = collector.open_window("target", 3, 2, 1.0, 1, ["r1u1"], 0.0)
    sample = {"type": "samples", "user": "r1u1", "phase": "target", "window": 3, "i": 0, "took_ms": 12.0,
              "samples": [{"t": 1, "direction": "send", "kind": "video", "bytes": 10}]}
    request(url + "/collect", json.dumps(sample).encode())
    health = collector.close_window(w)
    request(url + "/collect", json.dumps(dict(sample, i=1)).encode())   # after the close: dropped
    assert health["missing_samples"] == 1 and health["stats_ms_p50"] == 12.0
    samples = [r for s, r in records if s == "samples"]
    assert len(samples) == 1 and samples[0]["user"] == "r1u1" and samples[0]["participants"] == 1
