import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from reports import prometheus

DASHBOARD = Path(prometheus.__file__).with_name("grafana-dashboard.json")
LINE = re.compile(r'^([a-z_]+)\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)*)\} (\S+)$')


def stream(t, bytes_, **kw):
    s = {"t": t, "phase": "background", "window": "bg-1", "participants": 14, "room": 2, "user": "2-1",
         "peer": "2-3", "direction": "recv", "kind": "video", "ssrc": 42, "bytes": bytes_, "packets": 10,
         "packetsLost": 1, "jitter": 0.004, "rtt": 0.012, "framesPerSecond": 29.5, "freezeCount": 0}
    s.update(kw)
    return s


def parse(text):
    """{(name, labels...): value} from exposition text, checking every line's syntax."""
    series, types = {}, {}
    for line in text.strip().split("\n"):
        if line.startswith("# TYPE"):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        if line.startswith("# HELP"):
            continue
        m = LINE.match(line)
        assert m, line
        labels = tuple(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        key = (m.group(1),) + labels
        assert key not in series, f"duplicate series {key}"
        series[key] = float(m.group(3))
    return series, types


def test_exposition_has_the_latest_sample_of_each_stream():
    text = prometheus.exposition([stream(2000, 900), stream(1000, 100), stream(1000, 50, peer="2-2")],
                                 {"sfu": "janus", "run": "r1"}, participants=14)
    series, types = parse(text)
    labels = (("sfu", "janus"), ("run", "r1"), ("room", "2"), ("user", "2-1"), ("peer", "2-3"),
              ("direction", "recv"), ("kind", "video"), ("ssrc", "42"))
    assert series[("sfubench_stream_bytes_total",) + labels] == 900
    assert series[("sfubench_stream_rtt_seconds",) + labels] == 0.012
    assert series[("sfubench_participants", ("sfu", "janus"), ("run", "r1"))] == 14
    assert types["sfubench_stream_bytes_total"] == "counter"
    assert types["sfubench_stream_jitter_seconds"] == "gauge"
    assert len([k for k in series if k[0] == "sfubench_stream_bytes_total"]) == 2
    assert "sfubench_stream_target_bitrate_bits_per_second" not in types   # no such field in the samples


def test_label_values_are_escaped_and_null_peer_is_empty():
    text = prometheus.exposition([stream(1, 5, user='a"b\\c\nd', peer=None)])
    assert 'user="a\\"b\\\\c\\nd"' in text and 'peer=""' in text
    parse(text)


def test_no_samples_no_text():
    assert prometheus.exposition([]) == ""


def test_push_url_grouping():
    assert prometheus.push_url("http://gw:9091/", "sfubench", {"sfu": "janus", "run": "2025 x"}) == \
        "http://gw:9091/metrics/job/sfubench/sfu/janus/run/2025%20x"
    assert prometheus.push_url("http://gw:9091", "j", {"run": "a/b"}) == "http://gw:9091/metrics/job/j/run@base64/YS9i"


# A stand-in: no real Pushgateway can be had on this machine (the Go module proxy answers 403 for
# github.com/prometheus/pushgateway v1.6.0 to v1.11.1, and no registry ships a binary). It records
# the PUT a Pushgateway would receive, which is the part of the protocol sfubench owns.
class _Gateway(BaseHTTPRequestHandler):
    received: list = []

    def do_PUT(self):
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway():
    server = HTTPServer(("127.0.0.1", 0), _Gateway)
    _Gateway.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", _Gateway.received
    server.shutdown()
    server.server_close()


def test_publish_pushes_only_when_configured(gateway):
    url, received = gateway
    text = prometheus.publish([stream(1, 5)], sfu="janus", run="r1", participants=7)
    assert 'sfu="janus"' in text and received == []
    prometheus.publish([stream(1, 5)], sfu="janus", run="r1", participants=7, pushgateway=url)
    (path, ctype, body), = received
    assert path == "/metrics/job/sfubench/sfu/janus/run/r1"
    assert ctype.startswith("text/plain; version=0.0.4")
    assert "sfu=" not in body      # the grouping key carries them
    assert "sfubench_participants 7" in body


def test_grafana_dashboard_reads_the_exposed_metrics():
    dash = json.loads(DASHBOARD.read_text())
    known = set(prometheus.METRICS) | {prometheus.PARTICIPANTS}
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 8
    used = {m for e in exprs for m in re.findall(r"sfubench_[a-z_]+", e)}
    assert used <= known, used - known
    assert {"sfubench_stream_bytes_total", "sfubench_stream_rtt_seconds", prometheus.PARTICIPANTS} <= used
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert variables == {"datasource", "sfu", "run"}
    assert all('sfu=~"$sfu"' in e and 'run=~"$run"' in e for e in exprs)
    labels = {lab for e in exprs for lab in re.findall(r'([a-z_]+)=~?"', e)}
    assert labels <= set(prometheus.STREAM_LABELS) | {"sfu", "run"}
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
