"""Whether what the SFU carried is the media: its media traffic (UDP, headers included) within a band
of the payload its clients' getStats say they sent and received, and its signalling (TCP) small. A
client or driver that floods the signalling, or resends far more than it should, fails this before
its cost is taken for the SFU's (the synthetic LiveKit participant once re-offered without end:
1.8 Mbit/s of signalling per participant, twice the SFU's CPU)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrafficRule:
    low: float = 0.8               # media in (out) / payload the clients sent (received)
    high: float = 1.6              # headers, RTCP, ICE and DTLS add 10-35 % at these bitrates
    signalling_kbps: float = 20.0  # per participant: keepalives and the joins' and leaves' offers

    def text(self) -> str:
        return (f"The SFU's media (UDP, headers included) should be {self.low:g}-{self.high:g} times the payload "
                f"its clients' getStats count, each way, and its signalling (TCP) under {self.signalling_kbps:g} "
                "kbit/s per participant.")


def anomalies(cost: list[dict], rule: TrafficRule = TrafficRule()) -> list[str]:
    """What falls outside the rule, one sentence per participant count (cost.cost_series rows)."""
    out = []
    for r in cost:
        found = []
        for key, what in (("sfu_media_in_ratio", "received"), ("sfu_media_out_ratio", "sent")):
            v = r.get(key)
            if v is not None and not rule.low <= v <= rule.high:
                found.append(f"the SFU {what} {v:.2f} times the media payload the clients count")
        signalling = r.get("sfu_signalling_kbps_per_participant")
        if signalling is not None and signalling > rule.signalling_kbps:
            found.append(f"its signalling carried {signalling:,.0f} kbit/s per participant")
        if found:
            out.append(f"At {r['participants']} participants " + " and ".join(found)
                       + ": something other than the media loads the SFU (a client or driver), so its cost "
                         "there is not its own.")
    return out
