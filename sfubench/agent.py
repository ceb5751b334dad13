"""The probe of a host the engine does not run on: a remote grid's Chrome node (this file alone,
copied into the node's container by the media step, under whatever python3 the image has — so the
standard library only) and, through `serve_probe`, an SFU host's `sfubench serve`. It answers
GET /probe with one row of server.jsonl's schema (docs/contracts.md) for its role: the CPU seconds,
memory, quota and throttling of the cgroup it runs in (a container's, a pod's, a node's) and its
network namespace's UDP and interface counters.
    python3 agent.py --role clients --address POD_IP [--port 9470]"""
from __future__ import annotations

import argparse
import hmac
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROBE_PORT = 9470
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The run's secret: every request to the page server, a generator or an agent carries it in this
# header, checked before anything else is read; what the engine does not start itself gets it in this
# environment variable, never on a command line or in a file. Here because this file is copied alone
# onto the grid's nodes; synth/main.go names the same two.
TOKEN_HEADER = "X-Sfubench-Token"
TOKEN_ENV = "SFUBENCH_RUN_TOKEN"


def token_carried(headers, token: str) -> bool:
    """Whether a request's `headers` carry `token` (in constant time: the token is a secret)."""
    return hmac.compare_digest((headers.get(TOKEN_HEADER) or "").encode(), token.encode())


PROBE_CONNECTIONS = 32   # an engine reads a probe on one connection at a time; more are not its
ANSWER_BYTES = 1 << 20   # the most of an answer a control request reads: a probe row, facts, a log's tail


def read_bounded(response, limit: int = ANSWER_BYTES) -> bytes:
    """A control answer's body, at most `limit` bytes: OSError for a longer one (a peer that would
    fill the engine's memory is not one of ours)."""
    body = response.read(limit + 1)
    if len(body) > limit:
        raise OSError(f"an answer longer than {limit} bytes")
    return body


def host_urls(url: str, addresses=None) -> dict[str, str]:
    """`url` once per host: per address its host resolves to (a name may have one per node), or
    per address `addresses()` lists."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or 80
    if addresses is not None:
        found = set(addresses())
    else:
        found = {i[4][0] for i in socket.getaddrinfo(parts.hostname, port, socket.AF_INET, socket.SOCK_STREAM)}
    return {a: parts._replace(netloc=f"{a}:{port}").geturl() for a in sorted(found)}


def udp_counters(snmp: Path) -> dict:
    """The UDP counters of the network namespace whose /proc/<pid>/net/snmp is `snmp`."""
    try:
        lines = [line.split() for line in snmp.read_text().splitlines() if line.startswith("Udp:")]
    except OSError:
        return {}
    if len(lines) < 2:
        return {}
    row = dict(zip(lines[0][1:], lines[1][1:]))
    out = {}
    for key, name in (("InDatagrams", "udp_in"), ("OutDatagrams", "udp_out"), ("InErrors", "udp_in_errors"),
                      ("RcvbufErrors", "udp_rcvbuf_errors"), ("SndbufErrors", "udp_sndbuf_errors")):
        if row.get(key, "").isdigit():
            out[name] = int(row[key])
    return out


# /proc/net/dev's columns: 8 receive counters, then 8 transmit ones
_DEV = {0: "net_rx_bytes", 1: "net_rx_packets", 3: "net_rx_dropped", 8: "net_tx_bytes", 9: "net_tx_packets",
        11: "net_tx_dropped"}


def link_counters(dev: Path, interface: str = "") -> dict:
    """An interface's counters from /proc/<pid>/net/dev (the namespace of <pid>); without
    `interface`, the sum of all but loopback (a pod or a node has one that matters)."""
    try:
        lines = dev.read_text().splitlines()[2:]
    except OSError:
        return {}
    out: dict = {}
    for line in lines:
        name, _, rest = line.partition(":")
        name = name.strip()
        if name == interface or (not interface and name != "lo"):
            values = rest.split()
            for i, key in _DEV.items():
                if i < len(values) and values[i].isdigit():
                    out[key] = out.get(key, 0) + int(values[i])
    return out


def cpu_stat(folder: Path) -> dict:
    try:
        return dict(line.split() for line in (folder / "cpu.stat").read_text().splitlines())
    except (OSError, ValueError):
        return {}


def usage_s(folder: Path, version: int) -> float:
    """CPU seconds the cgroup at `folder` (its cpuacct folder under v1) has used."""
    if version == 2:
        return int(cpu_stat(folder)["usage_usec"]) / 1e6
    return int((folder / "cpuacct.usage").read_text()) / 1e9


def throttled_s(folder: Path, version: int) -> float:
    """Seconds the cgroup's quota has held it back (its cpu folder under v1; 0 without a quota)."""
    stat = cpu_stat(folder)
    if version == 2:
        return int(stat.get("throttled_usec", 0)) / 1e6
    return int(stat.get("throttled_time", 0)) / 1e9


def quota_periods(folder: Path) -> dict:
    """The CFS periods in which the cgroup ran (`periods`) and those in which its quota ran out
    (`throttled_periods`): their ratio is the share of time held back that cannot pass 100 %, as
    throttled time, summed over CPUs, can. Empty without a quota's accounting."""
    stat = cpu_stat(folder)
    if "nr_periods" not in stat:
        return {}
    return {"periods": int(stat["nr_periods"]), "throttled_periods": int(stat.get("nr_throttled", 0))}


def quota_cores(folder: Path, version: int) -> float | None:
    """The cores' worth of CPU time the cgroup's quota allows; None without one."""
    try:
        if version == 2:
            quota, period = (folder / "cpu.max").read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        return None if quota < 0 else quota / int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def own_cgroup() -> tuple[int, dict[str, Path]]:
    """(version, controller -> folder) of the cgroup this process runs in."""
    v1, unified = {}, None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            unified = path
        for c in controllers.split(","):
            if c in ("cpu", "cpuacct", "memory"):
                v1[c] = path
    if "cpuacct" in v1:
        folders = {}
        for c, path in v1.items():
            mount = next((d for d in (CGROUP_ROOT / c, CGROUP_ROOT / "cpu,cpuacct") if d.exists()), CGROUP_ROOT / c)
            folders[c] = mount / path.lstrip("/")
        return 1, folders
    if unified is None:
        raise RuntimeError("no cgroup of this process carries CPU accounting")
    d = CGROUP_ROOT / unified.lstrip("/")
    return 2, {"cpu": d, "cpuacct": d, "memory": d}


class CgroupProbe:
    """The cgroup this process runs in, as one server.jsonl row per `sample()`."""

    def __init__(self, role: str):
        self.role = role
        self.version, self.folders = own_cgroup()

    def _memory(self) -> int:
        d = self.folders.get("memory")
        for name in ("memory.current", "memory.usage_in_bytes"):
            try:
                return int((d / name).read_text())
            except (OSError, TypeError, ValueError):
                continue
        return 0

    def sample(self, **fields) -> dict:
        cores = quota_cores(self.folders["cpu"], self.version) or len(os.sched_getaffinity(0))
        row = {"t": int(time.time() * 1000), "role": self.role,
               "cpu_s": round(usage_s(self.folders["cpuacct"], self.version), 3), "rss": self._memory(),
               "cores": round(cores, 3), "throttled_s": round(throttled_s(self.folders["cpu"], self.version), 3),
               **quota_periods(self.folders["cpu"])}
        row.update(udp_counters(Path("/proc/self/net/snmp")))
        row.update(link_counters(Path("/proc/self/net/dev")))
        row.update(fields)
        return row


def machine_facts() -> dict:
    """This host: CPU model and count, memory, kernel, and the cloud's instance type where
    cloud-init recorded one (read from its file: no request to any metadata service)."""
    cpu, mhz = "", None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not cpu:
                cpu = value.strip()
            elif key.strip() == "cpu MHz" and mhz is None:
                mhz = float(value)
    except (OSError, ValueError):
        pass
    try:
        instance = json.loads(Path("/run/cloud-init/instance-data.json").read_text())["v1"].get("instance_type")
    except (OSError, ValueError, KeyError, AttributeError):
        instance = None
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "cpu_model": cpu, "cpu_mhz": mhz,
            "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "kernel": os.uname().release,
            "python": sys.version.split()[0], "instance_type": instance}


REQUEST_S = 30.0   # a request that began must be read whole within this, or its connection is cut


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection, as many as `max_connections`: one more is closed at once. A request
    that began (its first byte came) must be read and answered within REQUEST_S, else its connection
    is cut: a peer that trickles a byte at a time holds no slot for long. Its handlers are
    InTime's."""
    daemon_threads = True

    def __init__(self, address, handler, max_connections: int):
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(max_connections)
        self.deadlines: dict = {}          # connection -> when the request it is on must be done
        self.deadlines_lock = threading.Lock()
        self.closed = threading.Event()
        threading.Thread(target=self._cut_late, name="deadlines", daemon=True).start()

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address):
        # A peer closed mid-request (a page whose browser quit, a request cut late): nothing to report.
        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)

    def on_request(self, connection, begun: bool) -> None:
        with self.deadlines_lock:
            if begun:
                self.deadlines[connection] = time.monotonic() + REQUEST_S
            else:
                self.deadlines.pop(connection, None)

    def _cut_late(self) -> None:
        while not self.closed.wait(1.0):
            now = time.monotonic()
            with self.deadlines_lock:
                late = [c for c, due in self.deadlines.items() if due < now]
                for c in late:
                    del self.deadlines[c]
            for c in late:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def server_close(self):
        self.closed.set()
        super().server_close()


class InTime:
    """A BoundedServer's handler (mixed in before BaseHTTPRequestHandler): each request is timed
    from its first byte, not from the connection's last one (kept-alive connections wait idle)."""

    def handle_one_request(self):
        try:
            begun = bool(self.rfile.peek(1))
        except (OSError, ValueError):
            begun = False
        if not begun:   # closed, or idle past the socket's timeout
            self.close_connection = True
            return
        self.server.on_request(self.connection, True)
        try:
            super().handle_one_request()
        finally:
            self.server.on_request(self.connection, False)


def serve_probe(probe, address: str, port: int, token: str, log=None) -> ThreadingHTTPServer:
    """Answers GET /probe with `probe.sample()` and GET /facts with this host's machine_facts(), and
    with `log` (a file) GET /log with its last 256 KB, from a thread, until the returned server's
    shutdown(); only to requests that carry the run's `token` (there is no open mode)."""
    if not token:
        raise ValueError("a probe answers only to the run's token: none given")
    lock = threading.Lock()

    class Handler(InTime, BaseHTTPRequestHandler):
        timeout = 10

        def do_GET(self):
            if not token_carried(self.headers, token):
                self.send_error(403)
                return
            if self.path == "/facts":
                body, kind = json.dumps(machine_facts()).encode(), "application/json"
            elif self.path == "/log" and log is not None:
                body, kind = _tail(log), "text/plain; charset=utf-8"
            elif self.path == "/probe":
                with lock:   # a probe may keep state between reads (processes that ended)
                    body, kind = json.dumps(probe.sample()).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):
            pass

    server = BoundedServer((address, port), Handler, PROBE_CONNECTIONS)
    threading.Thread(target=server.serve_forever, name="probe", daemon=True).start()
    return server


def _tail(path: Path, size: int = 256 << 10) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read()
    except OSError:
        return b""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", default="clients")
    p.add_argument("--address", required=True, help="the address to answer on (the pod's or host's)")
    p.add_argument("--port", type=int, default=PROBE_PORT)
    args = p.parse_args()
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        raise SystemExit(f"agent: {TOKEN_ENV} must hold the run's token (the runner's Secret)")
    server = serve_probe(CgroupProbe(args.role), args.address, args.port, token)
    print(f"agent: {args.role} probe at http://{args.address}:{args.port}/probe", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
