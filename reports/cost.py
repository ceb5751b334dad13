"""What the SFU spent on forwarding and what it carried, per participant count: its CPU per forwarded
packet and stream, its interface and protocol traffic, its throttling, from the probe rows at the
edges of the ramp-up and target windows."""
from __future__ import annotations

from collections import defaultdict

from . import runfiles
from .windows import MEASURED, number, probe_edges, stream_key


class Spans:
    """Each measured stream's first and last packet and byte counts in each window: what cost_series
    takes from the samples, folded one sample at a time."""

    def __init__(self):
        self.span: dict[tuple, list] = {}   # (window, stream) -> [first t, packets, bytes, last t, packets, bytes]
        self.participants: dict = {}
        self.published: dict = defaultdict(set)   # window -> sent streams

    def drop(self, window) -> None:
        for key in [k for k in self.span if k[0] == window]:
            del self.span[key]
        self.participants.pop(window, None)
        self.published.pop(window, None)

    def add(self, s: dict) -> None:
        if s.get("phase") not in MEASURED or s.get("direction") not in ("send", "recv"):
            return
        if s.get("direction") == "send":
            self.published[s.get("window")].add(stream_key(s))
        t, n, b = number(s.get("t")), number(s.get("packets")), number(s.get("bytes"))
        if t is None or n is None:
            return
        key = (s.get("window"), stream_key(s))
        self.participants[s.get("window")] = s.get("participants")
        cur = self.span.get(key)
        if cur is None:
            self.span[key] = [t, n, b, t, n, b]
        elif t >= cur[3]:
            cur[3:] = [t, n, b]


def cost_series(run: runfiles.Run, spans: Spans | None = None) -> list[dict]:
    """What the SFU spent on forwarding, per participant count: its CPU (from the probe rows at the
    edges of the ramp-up and target windows) over what every receiver, browser or synthetic, got in
    those windows (Δpackets of each received audio and video stream between its first and last
    sample). `sfu_us_per_packet`: CPU µs per forwarded packet; `sfu_mhz_per_stream`: the cores it
    used, in MHz of this machine's clock, per forwarded stream (one published track delivered to one
    receiver), `sfu_mhz_per_published` per published track; `fwd_streams`, `fwd_pps`, `pub_streams`:
    what it forwarded and was sent; `sfu_in_mbps`, `sfu_out_mbps`: its interface's traffic;
    `sfu_udp_drops`: datagrams its namespace dropped for full socket buffers, per second. `spans`:
    the run's samples already folded (else they are read here)."""
    if spans is None:
        spans = Spans()
        for s in runfiles.iter_measured_samples(run):
            spans.add(s)
    participants, published = spans.participants, spans.published
    # window -> forwarded streams, forwarded packets/s, received payload bit/s, sent payload bit/s
    fwd: dict = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for (window, key), (t0, n0, b0, t1, n1, b1) in spans.span.items():
        if t1 <= t0:
            continue
        bps = (b1 - b0) * 8000.0 / (t1 - t0) if b0 is not None and b1 is not None and b1 >= b0 else 0.0
        if key[2] == "send":
            fwd[window][3] += bps
        elif n1 > n0:
            fwd[window][0] += 1
            fwd[window][1] += (n1 - n0) * 1000.0 / (t1 - t0)
            fwd[window][2] += bps
    edges = {window: roles["sfu"] for window, roles in probe_edges(run.server).items() if "sfu" in roles}
    # p -> Σ dt, Σ cores·dt, Σ pps·dt, Σ streams·dt, Σ published·dt, and Δ of each interface counter
    acc: dict = defaultdict(lambda: defaultdict(float))
    for window, (streams, pps, recv_bps, sent_bps) in fwd.items():
        e = edges.get(window, {})
        start, end, p = e.get("start"), e.get("end"), participants.get(window)
        if not start or not end or p is None or number(start.get("cpu_s")) is None or number(end.get("cpu_s")) is None:
            continue
        dt = (end["t"] - start["t"]) / 1000.0
        if dt > 0:
            a = acc[p]
            a["dt"] += dt
            a["cpu_s"] += end["cpu_s"] - start["cpu_s"]
            a["pps"] += pps * dt
            a["streams"] += streams * dt
            a["published"] += len(published.get(window, ())) * dt
            a["recv_bps"] += recv_bps * dt
            a["sent_bps"] += sent_bps * dt
            for key in ("net_rx_bytes", "net_tx_bytes", "udp_rcvbuf_errors", "periods", "throttled_periods",
                        *TRAFFIC):
                if number(start.get(key)) is not None and number(end.get(key)) is not None:
                    a[key] += end[key] - start[key]
                    a[key + "_dt"] += dt
    mhz = number((run.meta.get("machine") or {}).get("cpu_mhz"))
    out = []
    for p in sorted(acc):
        a = acc[p]
        dt = a["dt"]
        cores, pps, streams, pub = a["cpu_s"] / dt, a["pps"] / dt, a["streams"] / dt, a["published"] / dt
        if pps <= 0:
            continue   # nothing forwarded (every join failed): no cost per packet or stream to give
        row = {"participants": p, "fwd_streams": round(streams), "fwd_pps": pps, "sfu_cores_fwd": cores,
               "sfu_us_per_packet": 1e6 * cores / pps, "pub_streams": round(pub)}
        if mhz:
            row["sfu_mhz_per_stream"] = cores * mhz / streams
            if pub:
                row["sfu_mhz_per_published"] = cores * mhz / pub
        if a["net_rx_bytes_dt"]:
            row["sfu_in_mbps"] = 8e-6 * a["net_rx_bytes"] / a["net_rx_bytes_dt"]
            row["sfu_out_mbps"] = 8e-6 * a["net_tx_bytes"] / a["net_tx_bytes_dt"]
        if a["udp_rcvbuf_errors_dt"]:
            row["sfu_udp_drops"] = a["udp_rcvbuf_errors"] / a["udp_rcvbuf_errors_dt"]
        if a["periods"]:
            row["sfu_throttled"] = a["throttled_periods"] / a["periods"]
        row.update(_traffic(a, p))
        out.append(row)
    return out


TRAFFIC = ("udp_in_bytes", "udp_out_bytes", "tcp_in_bytes", "tcp_out_bytes")


def _traffic(a: dict, participants: int) -> dict:
    """The SFU's media (UDP) and signalling (TCP) rates from its namespace's counters, and its media
    against what the clients' getStats say they sent and received (payload only: the ratios carry
    the packets' headers, RTCP and ICE)."""
    dt = a["udp_in_bytes_dt"]
    if not dt:
        return {}
    rate = {key: 8.0 * a[key] / dt for key in TRAFFIC}
    row = {"sfu_media_in_mbps": rate["udp_in_bytes"] / 1e6, "sfu_media_out_mbps": rate["udp_out_bytes"] / 1e6,
           "sfu_signalling_kbps": (rate["tcp_in_bytes"] + rate["tcp_out_bytes"]) / 1e3}
    if participants:
        row["sfu_signalling_kbps_per_participant"] = row["sfu_signalling_kbps"] / participants
    sent, recv = a["sent_bps"] / a["dt"], a["recv_bps"] / a["dt"]
    if sent:
        row["sfu_media_in_ratio"] = rate["udp_in_bytes"] / sent
    if recv:
        row["sfu_media_out_ratio"] = rate["udp_out_bytes"] / recv
    return row
