import json
import re
from pathlib import Path

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


def test_publish_pushes_to_a_real_pushgateway_only_when_configured(tmp_path):
    import urllib.request

    from support import backends
    with backends.pushgateway(tmp_path) as url:
        text = prometheus.publish([stream(1, 5)], sfu="janus", run="r1", participants=7)
        assert 'sfu="janus"' in text
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            assert "sfubench_" not in r.read().decode()
        prometheus.publish([stream(1, 5)], sfu="janus", run="r 1/x", participants=7, pushgateway=url)
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            exposed = r.read().decode()
    # the grouping key's labels are on every series, the run's slash carried by its base64 form
    assert 'sfubench_participants{instance="",job="sfubench",run="r 1/x",sfu="janus"} 7' in exposed
    assert 'sfubench_stream_bytes_total{' in exposed and 'ssrc="' in exposed


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


def test_results_expose_each_figure_at_target_with_the_per_stream_figures_percentiles():
    headline = {"participants": 14, "fps": 14.5, "fps_p50": 15.0, "fps_p95": 15.0, "fps_p99": 15.2, "fps_max": 15.3,
                "rtt_send_ms": 12.0, "loss_pct": 0.5, "knee": None, "client_bound": False}
    series, types = parse(prometheus.results(headline))
    assert types == {"sfubench_result": "gauge"}
    assert series[("sfubench_result", ("figure", "fps"), ("stat", "mean"))] == 14.5
    assert series[("sfubench_result", ("figure", "fps"), ("stat", "p99"))] == 15.2
    assert series[("sfubench_result", ("figure", "rtt_send_ms"), ("stat", "mean"))] == 12.0
    assert series[("sfubench_result", ("figure", "loss_pct"), ("stat", "mean"))] == 0.5
    # absent figures and statistics (fps_p90; loss has no percentiles) are no series, booleans neither
    assert ("sfubench_result", ("figure", "fps"), ("stat", "p90")) not in series
    assert not [k for k in series if k[1] == ("figure", "loss_pct") and k[2] != ("stat", "mean")]
    assert prometheus.results({}) == ""
