"""A host's probe of its SFU over HTTP (`sfubench serve`'s), read by the engine as a probe of its
own: a real busy process measured through a real server on 127.0.0.1."""
import json
import secrets
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest

from sfubench.agent import TOKEN_HEADER, serve_probe
from sfubench.probes import RemoteProbe, TreeProbe

TOKEN = secrets.token_urlsafe(16)   # a run's


@pytest.fixture
def busy():
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield p
    p.kill()
    p.wait()


def test_the_remote_probe_reads_what_the_hosts_probe_measures(busy):
    server = serve_probe(TreeProbe("sfu", lambda: [busy.pid], lambda: busy.pid, "lo"), "127.0.0.1", 0, TOKEN)
    url = f"http://127.0.0.1:{server.server_address[1]}/probe"
    try:
        probe = RemoteProbe("sfu", url, token=TOKEN)
        first = probe.sample(phase="target", window=1, edge="start")
        time.sleep(1.0)
        before = sum(psutil.Process(busy.pid).cpu_times()[:2])
        second = probe.sample(phase="target", window=1, edge="end")
        after = sum(psutil.Process(busy.pid).cpu_times()[:2])
    finally:
        server.shutdown()
    assert first["role"] == second["role"] == "sfu" and second["edge"] == "end"
    assert second["cores"] == os.cpu_count()
    # the CPU the host counted is the process's own: it lies between the readings taken just before
    # and after the request, however slow the machine (a reading after the server's shutdown, which
    # can wait half a second, once fell outside a fixed slack)
    assert before - 0.01 <= second["cpu_s"] <= after + 0.01, (before, second, after)
    assert second["cpu_s"] - first["cpu_s"] > 0.1 and second["cpu"] > 0, (first, second)
    assert second["rss"] > 1e6 and list(second["processes"]) == [psutil.Process(busy.pid).name()], second
    assert second["net_rx_bytes"] >= first["net_rx_bytes"] > 0   # lo carried the probe's own requests
    assert "udp_in" in second


def test_a_probe_that_stops_answering_leaves_its_rows_out(busy):
    server = serve_probe(TreeProbe("sfu", lambda: [busy.pid]), "127.0.0.1", 0, TOKEN)
    url = f"http://127.0.0.1:{server.server_address[1]}/probe"
    probe = RemoteProbe("sfu", url, timeout=1, token=TOKEN)
    server.shutdown()
    server.server_close()
    assert probe.sample(edge="end") is None and url in probe.error
    with pytest.raises(OSError):
        RemoteProbe("sfu", url, timeout=1, token=TOKEN)


def test_the_probe_answers_only_its_path(busy):
    server = serve_probe(TreeProbe("sfu", lambda: [busy.pid]), "127.0.0.1", 0, TOKEN)
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(urllib.request.Request(
                f"http://127.0.0.1:{server.server_address[1]}/", headers={TOKEN_HEADER: TOKEN}), timeout=3)
        assert e.value.code == 404
    finally:
        server.shutdown()


def test_a_name_of_many_nodes_is_their_sum_and_a_node_that_goes_keeps_its_count(busy, monkeypatch):
    """A headless Service's name resolves to one address per node; the cluster's DNS is not here, so
    the resolver answers that name with two loopback addresses, each a real probe server."""
    first = serve_probe(TreeProbe("clients", lambda: [busy.pid]), "127.0.0.1", 0, TOKEN)
    port = first.server_address[1]
    second = serve_probe(TreeProbe("clients", lambda: [os.getpid()]), "127.0.0.2", port, TOKEN)
    nodes = ["127.0.0.1", "127.0.0.2"]
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "chrome-node-probe.sfubench-r1.svc":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in nodes]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    try:
        probe = RemoteProbe("clients", f"http://chrome-node-probe.sfubench-r1.svc:{port}/probe", token=TOKEN)
        both = probe.sample()
        one = json.loads(urllib.request.build_opener(urllib.request.ProxyHandler({})).open(urllib.request.Request(
            f"http://127.0.0.1:{port}/probe", headers={TOKEN_HEADER: TOKEN}), timeout=3).read())
        assert both["hosts"] == 2 and both["cores"] == 2 * os.cpu_count()
        assert both["cpu_s"] > one["cpu_s"] - 1.0 and both["rss"] > one["rss"], (both, one)
        second.shutdown()
        second.server_close()
        nodes.remove("127.0.0.2")   # the pod is gone, and with it its address
        after = probe.sample()
        assert after["hosts"] == 1 and after["cores"] == os.cpu_count()
        assert after["cpu_s"] >= both["cpu_s"], "a node that went away keeps what it had counted"
    finally:
        first.shutdown()


def test_a_forged_probe_request_without_the_runs_token_is_refused(busy):
    """An agent given the run's token answers only requests that carry it: the runner's probe reads
    it, anyone else gets 403 and no figure."""
    server = serve_probe(TreeProbe("sfu", lambda: [busy.pid]), "127.0.0.1", 0, TOKEN)
    url = f"http://127.0.0.1:{server.server_address[1]}/probe"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        assert RemoteProbe("sfu", url, token=TOKEN).sample(edge="end")["role"] == "sfu"
        for forged in ({}, {"X-Sfubench-Token": TOKEN[:-1]}):
            with pytest.raises(urllib.error.HTTPError) as e:
                opener.open(urllib.request.Request(url, headers=forged), timeout=5)
            assert e.value.code == 403 and b"cpu_s" not in e.value.read()
        with pytest.raises(urllib.error.HTTPError):
            RemoteProbe("sfu", url, token=TOKEN + "x")
    finally:
        server.shutdown()
        server.server_close()


def test_the_remote_probe_measures_how_far_a_hosts_clock_is_from_the_runners(busy):
    """A host whose clock runs 300 ms ahead (its probe's rows stamped so; the host's probe is
    real, only its clock is shifted): each row says by how much, within the request's round trip."""
    class Ahead(TreeProbe):
        def sample(self, **fields):
            row = super().sample(**fields)
            row["t"] += 300
            return row
    server = serve_probe(Ahead("sfu", lambda: [busy.pid]), "127.0.0.1", 0, TOKEN)
    try:
        probe = RemoteProbe("sfu", f"http://127.0.0.1:{server.server_address[1]}/probe", token=TOKEN)
        row = probe.sample(edge="end")
    finally:
        server.shutdown()
        server.server_close()
    assert abs(row["clock_offset_ms"] - 300) <= row["clock_error_ms"] + 2, row
    assert 0 <= row["clock_error_ms"] < 100


def test_a_control_answer_longer_than_the_bound_is_refused_not_read_whole():
    import io

    from sfubench.agent import ANSWER_BYTES, read_bounded
    assert read_bounded(io.BytesIO(b"x" * ANSWER_BYTES)) == b"x" * ANSWER_BYTES
    with pytest.raises(OSError, match=f"longer than {ANSWER_BYTES} bytes"):
        read_bounded(io.BytesIO(b"x" * (ANSWER_BYTES + 1)))


def test_the_probe_serves_a_bounded_number_of_connections(busy):
    """An agent takes PROBE_CONNECTIONS connections at once; one more is closed unserved."""
    import socket

    from sfubench.agent import PROBE_CONNECTIONS
    server = serve_probe(TreeProbe("sfu", lambda: [busy.pid]), "127.0.0.1", 0, TOKEN)
    try:
        host, port = server.server_address[:2]
        held = [socket.create_connection((host, port), timeout=5) for _ in range(PROBE_CONNECTIONS)]
        extra = socket.create_connection((host, port), timeout=5)
        assert extra.recv(1) == b""
        extra.close()
        for s in held:
            s.close()
    finally:
        server.shutdown()
