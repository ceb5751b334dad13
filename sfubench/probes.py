"""CPU and memory probes, one per role: `sfu`, `clients` (the grid and its browsers), `machine` (every
core of the host) and `engine` (this process). Each row of server.jsonl carries the role's cumulative
CPU seconds (`cpu_s`), so the CPU of any window is Δcpu_s / Δt between the rows at its edges; `cpu`
(cores since the previous row) for the time series; and `cores`, what the role may use at most (its
quota, else the machine's cores), which the client-bound rule compares the clients' CPU with. The
`sfu` and `clients` rows also carry their network namespace's UDP counters (`udp_in`, `udp_out`,
`udp_rcvbuf_errors` and `udp_sndbuf_errors`: datagrams dropped because a socket's buffer was full,
`udp_in_errors`), from which the client-bound rule learns that the clients could not keep up with
what reached them, and their interface's (`net_rx_bytes`, `net_rx_packets`, `net_rx_dropped` and
the same for tx), from which the reports draw what the SFU received and sent. `sfu` rows also
break its CPU down by process name (`processes`: name -> CPU seconds of its live processes), so a
multi-process SFU (mediasoup's workers, a Node.js signalling process) shows where the time goes."""
from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import psutil

from .agent import TOKEN_HEADER, host_urls, link_counters, read_bounded, udp_counters
from .cgroups import CpuGroup


class Probe:
    role = ""

    def __init__(self, cores: float | None = None, net=None, interface: str = "", counters=None):
        """`net()`: a process of the role's network namespace, whose UDP counters and whose
        `interface`'s counters are read; `counters()`: more cumulative fields (sfubench/traffic.py's)."""
        self.cores = cores or os.cpu_count()
        self.net, self.interface, self.counters = net, interface, counters
        self.last = None

    def read(self) -> tuple[float, int, dict]:
        """(cumulative CPU seconds, resident bytes, extra fields)."""
        raise NotImplementedError

    def sample(self, **fields) -> dict:
        now = time.time()
        cpu_s, rss, extra = self.read()
        pid = self.net() if self.net else None
        if pid is not None:
            extra = {**extra, **udp_counters(Path(f"/proc/{pid}/net/snmp"))}
            if self.interface:
                extra.update(link_counters(Path(f"/proc/{pid}/net/dev"), self.interface))
        if self.counters is not None:
            extra.update(self.counters())
        row = {"t": int(now * 1000), "role": self.role, "cpu_s": round(cpu_s, 3), "rss": rss,
               "cores": self.cores, **extra, **fields}
        if self.last:
            dt = now - self.last[0]
            row["cpu"] = round((cpu_s - self.last[1]) / dt, 4) if dt > 0 else None
        self.last = (now, cpu_s)
        return row


def by_name(pids) -> dict[str, float]:
    """CPU seconds of the live processes `pids`, summed per process name."""
    out: dict[str, float] = {}
    for pid in pids:
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                t = p.cpu_times()
                out[p.name()] = out.get(p.name(), 0.0) + t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return {name: round(v, 3) for name, v in out.items()}


def _rss(pids) -> int:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


class GroupProbe(Probe):
    """A role in its own cgroup: CPU exactly as the kernel accounts it, and the time its quota held
    it back."""

    def __init__(self, role: str, group: CpuGroup, net=None, interface: str = "", counters=None):
        super().__init__(group.cores or (len(_cpu_list(group.cpus)) if group.cpus else None), net, interface,
                         counters)
        self.role = role
        self.group = group

    def read(self):
        pids = self.group.pids()
        extra = {"throttled_s": round(self.group.throttled_s(), 3), **self.group.periods()}
        if self.role == "sfu":
            extra["processes"] = by_name(pids)
        return self.group.usage_s(), _rss(pids), extra


class TreeProbe(Probe):
    """A role as the process trees under `roots()`, where no cgroup holds it."""

    def __init__(self, role: str, roots, net=None, interface: str = "", counters=None):
        super().__init__(net=net, interface=interface, counters=counters)
        self.role = role
        self.roots = roots
        self.dead = 0.0      # CPU of processes that ended: kept so the cumulative never drops
        self.seen: dict[int, tuple[float, float]] = {}   # pid -> (create_time, last cpu seconds)

    def _tree(self):
        for pid in self.roots():
            try:
                root = psutil.Process(pid)
                yield root
                yield from root.children(recursive=True)
            except psutil.NoSuchProcess:
                continue

    def read(self):
        total, rss, alive = 0.0, 0, {}
        for p in self._tree():
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu = t.user + t.system
                    rss += p.memory_info().rss
                    alive[p.pid] = (p.create_time(), cpu)
            except psutil.NoSuchProcess:
                continue
            total += cpu
        for pid, (created, cpu) in self.seen.items():
            if pid not in alive or alive[pid][0] != created:
                self.dead += cpu
        self.seen = alive
        return total + self.dead, rss, ({"processes": by_name(alive)} if self.role == "sfu" else {})


class MachineProbe(Probe):
    """Every core of the host: when the machine is saturated, no role's figures can be trusted. Of
    its busy time, what no process of a role spent: the hypervisor's (`steal_s`, a VM's CPUs
    taken back) and the kernel's deferred interrupt work (`softirq_s`, much of the lab's packet
    delivery), cumulative CPU seconds."""
    role = "machine"

    def read(self):
        t = psutil.cpu_times()
        busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        parts = {f"{k}_s": round(getattr(t, k), 3) for k in ("steal", "softirq") if hasattr(t, k)}
        return busy, psutil.virtual_memory().used, parts


class EngineProbe(Probe):
    """This process alone (the collector and runner), not the servers it started."""
    role = "engine"

    def read(self):
        p = psutil.Process()
        t = p.cpu_times()
        return t.user + t.system, p.memory_info().rss, {}


class RemoteProbe(Probe):
    """A role on other hosts, read from the probes they answer (sfubench/agent.py: an SFU host's
    `sfubench serve`, a grid node's agent). The hosts are the addresses the URL's host resolves to
    (a name may have one per node), or those `addresses()` lists (the Kubernetes provisioner's
    ready nodes): their rows are summed, and a host that went away keeps what it had counted, so
    the cumulative figures never drop. A row that cannot be read whole is left out, not made up.
    Each read also compares the hosts' clocks with this one (a row's `t` against the middle of its
    request): `clock_offset_ms` is the largest offset among them, `clock_error_ms` what the
    request's round trip leaves uncertain; pages stamp samples and frames with their node's clock,
    so windows and delays rely on these staying small."""

    def __init__(self, role: str, url: str, timeout: float = 3.0, addresses=None, token: str = ""):
        self.url, self.timeout, self.addresses = url, timeout, addresses
        self.headers = {TOKEN_HEADER: token} if token else {}
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.hosts: dict[str, dict] = {}    # address -> its previous row
        self.gone: dict[str, float] = {}    # cumulative figures of hosts that went away
        self.error: str | None = None
        super().__init__()
        self.role = role
        self.read()   # OSError when nothing answers: the caller decides

    def _get(self, url: str) -> tuple[dict, float, float]:
        """(the row, its host's clock minus ours in ms, half the request's round trip in ms)."""
        sent = time.time()
        with self._opener.open(urllib.request.Request(url, headers=self.headers), timeout=self.timeout) as r:
            row = json.loads(read_bounded(r))
        back = time.time()
        return row, row["t"] - (sent + back) * 500, (back - sent) * 500

    def read(self):
        got = {address: self._get(url) for address, url in host_urls(self.url, self.addresses).items()}
        rows = {address: row for address, (row, _, _) in got.items()}
        for address in set(self.hosts) - set(rows):
            for key, value in self.hosts[address].items():
                if key in CUMULATIVE:
                    self.gone[key] = self.gone.get(key, 0) + value
        self.hosts = rows
        total = dict(self.gone)
        processes: dict[str, float] = {}
        for row in rows.values():
            for key, value in row.items():
                if key in CUMULATIVE or key in ("rss", "cores"):
                    total[key] = total.get(key, 0) + value
            for name, cpu in (row.get("processes") or {}).items():
                processes[name] = round(processes.get(name, 0.0) + cpu, 3)
        extra = {k: round(v, 3) for k, v in total.items() if k not in ("cpu_s", "rss")}
        if processes:
            extra["processes"] = processes
        extra["hosts"] = len(rows)
        if got:
            _, offset, error = max(got.values(), key=lambda g: abs(g[1]))
            extra.update(clock_offset_ms=round(offset, 1), clock_error_ms=round(error, 1))
        return total.get("cpu_s", 0.0), int(total.get("rss", 0)), extra

    def sample(self, **fields) -> dict | None:
        try:
            return super().sample(**fields)
        except (OSError, ValueError, KeyError) as e:
            self.error = f"{self.url}: {e}"
            return None


# the figures a probe row counts up from its host's start
CUMULATIVE = {"cpu_s", "throttled_s", "periods", "throttled_periods", "udp_in", "udp_out", "udp_in_errors", "udp_rcvbuf_errors",
              "udp_sndbuf_errors", "net_rx_bytes", "net_rx_packets", "net_rx_dropped", "net_tx_bytes",
              "net_tx_packets", "net_tx_dropped", "udp_in_bytes", "udp_out_bytes", "tcp_in_bytes",
              "tcp_out_bytes"}


def _cpu_list(spec: str) -> list[int]:
    out = []
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out
