"""Was the load generator, not the SFU, the limit? Judged per measurement window from what the
clients themselves show: how long their CPU quota held them back, how busy the machine was, their
encoders' frame rate against the source's, their pages' main-thread lag, how long a getStats round
took, and whether the window's samples came in on time. (Their CPU against their quota alone says
little: a group at its quota for a second is only as starved as its throttling shows. And averages —
CPU shares, mean lag, median getStats time — over a window of a second or two also reflect the burst
a room's freshly joined participants cause: there they count only at several times their thresholds.) A window that crosses any threshold is client-bound:
its figures describe the clients, so the knee rule, comparisons and trends never blame the SFU for it.

Inputs per window (docs/contracts.md): the window's record in windows.jsonl, the probe rows at its
edges in server.jsonl, and the sent video streams' frame rates in samples.jsonl.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from statistics import median


@dataclass(frozen=True)
class ClientRule:
    averaged_s: float = 3.0        # averages over shorter windows count only at `short` times their
    short: float = 3.0             # thresholds (the machine's CPU share not at all)
    throttled: float = 0.10        # share of the window's CFS periods in which the clients' quota ran out
    machine_cpu: float = 0.95      # share of all the machine's cores busy: everything starves
    encode_fps: float = 0.8        # sent video frame rate (not bandwidth-limited) vs the source's
    lag_ms: float = 1000.0         # a page's main thread held up this long at once
    lag_mean_ms: float = 10.0      # or this long on average
    stats_ms: float = 100.0        # median getStats round
    overrun: float = 2.0           # the window lasted this many times its configured length (+ 1 s)
    socket_drops: float = 0.002    # share of the datagrams reaching the clients that their full
                                   # receive buffers dropped (a tenth of the knee rule's loss)
    pacing_ms: float = 20.0        # synthetic publishers' 99th-percentile lateness: as much jitter as
                                   # an SFU's queues add when it struggles
    sfu_throttled: float = 0.5     # an SFU whose quota ran out in this share of its periods and whose
    sfu_drops: float = 0.01        # sockets dropped this share of the datagrams reaching them is past
                                   # its limit whatever the clients did: clients that fall behind send
                                   # it less, not more

    def text(self) -> str:
        return (
            "A measurement window is client-bound when the median sent frame rate (streams not "
            f"limited by bandwidth) fell below {self.encode_fps:.0%} of the source's, or a page's main "
            f"thread was held up {self.lag_ms:g} ms at once, or samples never arrived, or the window "
            f"lasted over {self.overrun:g} times its configured length, or the clients' full socket "
            f"buffers dropped {self.socket_drops:.1%} of the datagrams reaching them; or when synthetic publishers sent 1% of their packets "
            f"{self.pacing_ms:g} ms late or later, or the clients' CPU quota "
            f"ran out in {self.throttled:.0%} of its scheduling periods, or the machine's cores were "
            f"{self.machine_cpu:.0%} busy (the SFU and the clients share them), or pages' main threads "
            f"were {self.lag_mean_ms:g} ms late on average, or the median getStats round took "
            f"{self.stats_ms:g} ms — over windows shorter than {self.averaged_s:g} s, which a room's "
            f"joining burst colours, these count only at {self.short:g} times those figures (the "
            "machine's share not at all). A window in which the SFU itself was saturated (its sockets "
            f"dropped {self.sfu_drops:.0%} of the datagrams reaching them and, under a quota, the quota ran out in "
            f"{self.sfu_throttled:.0%} of its periods) is the SFU's, however strained its clients: "
            "clients that fall behind send it less, not more."
        )


def _span(edges: dict, role: str) -> float | None:
    e = edges.get(role, {})
    if not e.get("start") or not e.get("end"):
        return None
    return (e["end"]["t"] - e["start"]["t"]) / 1000.0


def _share(edges: dict, role: str, key: str = "cpu_s") -> tuple[float, float] | None:
    """(`key` used per second of the window, the cores the role may use) from the probe rows at the
    window's edges."""
    e = edges.get(role, {})
    start, end = e.get("start"), e.get("end")
    if not start or not end or start.get(key) is None or end.get(key) is None:
        return None
    dt = (end["t"] - start["t"]) / 1000.0
    if dt <= 0:
        return None
    return (end[key] - start[key]) / dt, float(end.get("cores") or 0)


def _sharing(edges: dict) -> str:
    """Who shared a busy machine: the SFU and the clients, and where they took a tenth of a core or
    more, the hypervisor (steal) and the kernel's softirq work, which no role's process spent."""
    parts = ["the SFU and the clients share them"]
    for key, what in (("steal_s", "stolen by the hypervisor"), ("softirq_s", "in softirq")):
        used = _share(edges, "machine", key)
        if used and used[0] >= 0.1:
            parts.append(f"{used[0]:.2f} core {what}")
    return "; ".join(parts)


def cores_used(edges: dict, role: str) -> float | None:
    """The cores `role` kept busy over a window, on average; None unprobed."""
    used = _share(edges, role)
    return used[0] if used else None


def busy_share(edges: dict, role: str) -> float | None:
    """The share of the cores `role` may use that it kept busy over a window (0-1); None unprobed."""
    used = _share(edges, role)
    return used[0] / used[1] if used and used[1] else None


def throttled_share(edges: dict, role: str) -> float | None:
    """The share of a window's CFS periods in which `role`'s quota ran out (0-1); for runs recorded
    before periods were counted, its throttled time per second spread over the cores it may use."""
    periods, throttled = _share(edges, role, "periods"), _share(edges, role, "throttled_periods")
    if periods and throttled:   # no period ran: no quota, or a group that stayed idle
        return throttled[0] / periods[0] if periods[0] > 0 else None
    seconds = _share(edges, role, "throttled_s")
    if not seconds:
        return None
    return min(1.0, seconds[0] / max(1.0, math.ceil(seconds[1] or 1.0)))


def assess(window: dict, edges: dict[str, dict[str, dict]], send_fps: list[float], source_fps: float | None,
           interval: float | None, rule: ClientRule = ClientRule()) -> list[str]:
    """Why `window` (a windows.jsonl record) was client-bound; empty when its clients had headroom.
    `edges`: role -> {"start"/"end": server.jsonl row}; `send_fps`: the frame rates of its sent video
    streams that bandwidth did not limit."""
    reasons = []
    span = _span(edges, "clients") or _span(edges, "machine") or window.get("duration_s") or 0.0
    averaged = span >= rule.averaged_s
    k = 1.0 if averaged else rule.short
    throttled = throttled_share(edges, "clients")
    if throttled is not None and throttled >= k * rule.throttled:
        reasons.append(f"their CPU quota ran out in {throttled:.0%} of its scheduling periods")
    machine = _share(edges, "machine")
    if averaged and machine and machine[1] and machine[0] >= rule.machine_cpu * machine[1]:
        reasons.append(f"the machine's {machine[1]:g} cores were {machine[0] / machine[1]:.0%} busy "
                       f"({_sharing(edges)})")
    if send_fps and source_fps:
        fps = median(send_fps)
        if fps < rule.encode_fps * source_fps:
            reasons.append(f"the senders encoded {fps:.1f} of the source's {source_fps:g} fps")
    lag = window.get("lag_ms_max")
    if lag is not None and lag >= rule.lag_ms:
        reasons.append(f"a page's main thread was held up {lag / 1000:.1f} s")
    lag_mean = window.get("lag_ms_mean")
    if lag_mean is not None and lag_mean >= k * rule.lag_mean_ms:
        reasons.append(f"pages' main threads were {lag_mean:.0f} ms late on average")
    stats = window.get("stats_ms_p50")
    if stats is not None and stats >= k * rule.stats_ms:
        reasons.append(f"a getStats round took {stats:.0f} ms (median)")
    missing = window.get("missing_samples") or 0
    if missing:
        reasons.append(f"{missing} of {(window.get('samples') or 0) * (window.get('expected') or 0)} "
                       f"samples never arrived")
    drops, received = _share(edges, "clients", "udp_rcvbuf_errors"), _share(edges, "clients", "udp_in")
    if drops and received and drops[0] > 0 and drops[0] >= rule.socket_drops * (drops[0] + received[0]):
        reasons.append(f"the clients' sockets dropped {drops[0] / (drops[0] + received[0]):.1%} of the datagrams "
                       "reaching them (receive buffers full)")
    pacing = window.get("pacing_ms_p99")
    if pacing is not None and pacing >= k * rule.pacing_ms:
        reasons.append(f"synthetic publishers sent 1% of their packets {pacing:.0f} ms late or later")
    configured = ((window.get("samples") or 1) - 1) * (interval or 0)
    duration = window.get("duration_s")
    if duration is not None and duration > rule.overrun * configured + 1.0:
        reasons.append(f"the window took {duration:.1f} s for {configured:g} s of samples")
    return reasons


def sfu_saturated(edges: dict, rule: ClientRule = ClientRule()) -> str:
    """Why the SFU was past its own limit in a window (the probe rows at its edges, as `assess` takes
    them): its sockets dropped what reached them while, under a quota, it had spent that quota. Empty
    when it was not."""
    drops, received = _share(edges, "sfu", "udp_rcvbuf_errors"), _share(edges, "sfu", "udp_in")
    if not drops or not received or drops[0] <= 0:
        return ""
    dropped = drops[0] / (drops[0] + received[0])
    throttled = throttled_share(edges, "sfu")
    if dropped < rule.sfu_drops or (throttled is not None and throttled < rule.sfu_throttled):
        return ""
    quota = f"its CPU quota ran out in {throttled:.0%} of its periods and " if throttled is not None else ""
    return f"the SFU was saturated: {quota}its sockets dropped {dropped:.0%} of the datagrams reaching them"


def sentence(health: list[dict]) -> str:
    """One plain sentence on whether the load generator limited the run (health: series.window_health)."""
    if not health:
        return "The clients' health was not recorded (no windows.jsonl): whether they limited the run is unknown."
    bound = [h for h in health if h["client_bound"]]
    blind = sum(1 for h in health if not h.get("cpu_probed", True))
    caveat = (f" The clients' CPU was not measured in {blind} of the {len(health)} windows (their browsers ran "
              "on a remote grid's nodes): those are judged by the pages' own signs only (frame rates, "
              "main-thread lag, getStats time, late samples), which a node short of CPU may not show."
              if blind else "")
    overruled = [h for h in health if h.get("overruled")]
    also = (f" In {len(overruled)} {'other ' if not bound else ''}window{'s' if len(overruled) > 1 else ''} "
            f"the clients were strained, but {overruled[0]['overruled']}: the SFU had given way, whatever its "
            "clients did (clients that fall behind send it less)." if overruled else "")
    if not bound:
        if blind:
            return (f"No measured window showed the clients limiting the run ({len(health)} windows)." + also + caveat)
        if overruled:
            return (f"The clients had headroom in {len(health) - len(overruled)} of {len(health)} measured "
                    f"windows: the figures describe the SFU, not the load generator.{also}")
        return (f"The clients had headroom in all {len(health)} measured windows: the figures describe the "
                "SFU, not the load generator.")
    first = min(bound, key=lambda h: (h["participants"] or 0, h["window"] or 0))
    return (f"The load generator was the limit in {len(bound)} of {len(health)} measured windows, first at "
            f"{first['participants']} participants ({'; '.join(first['reasons'])}): figures from there on "
            "describe the clients, not the SFU." + also + caveat)
