"""What the SFU's host sends and receives, by protocol: media (UDP: RTP, RTCP, ICE, DTLS) apart
from signalling (TCP: WebSocket and HTTP signalling, and the engine's health checks). A driver or
page that floods an SFU's signalling shows here, not as the SFU's own cost.

nftables counts every packet's bytes (IP header included) in the SFU's network namespace; the
probe reads the counters at each window's edges (server.jsonl: `udp_in_bytes`, `udp_out_bytes`,
`tcp_in_bytes`, `tcp_out_bytes`, cumulative)."""
from __future__ import annotations

import json
import shutil
import subprocess

TABLE = "sfubench"
COUNTERS = ("udp_in", "udp_out", "tcp_in", "tcp_out")
RULESET = f"""table inet {TABLE} {{
{''.join(f'  counter {c} {{ }}' + chr(10) for c in COUNTERS)}  chain input {{
    type filter hook input priority 0; policy accept;
    meta l4proto udp counter name "udp_in"
    meta l4proto tcp counter name "tcp_in"
  }}
  chain output {{
    type filter hook output priority 0; policy accept;
    meta l4proto udp counter name "udp_out"
    meta l4proto tcp counter name "tcp_out"
  }}
}}
"""


def _nft(netns: str) -> list[str]:
    return (["ip", "netns", "exec", netns] if netns else []) + ["nft"]


def install(netns: str) -> bool:
    """Counts the traffic of network namespace `netns` ("" for this host's own); False where nft
    is missing or refuses (the counters are then absent and the report says so)."""
    if shutil.which("nft") is None:
        return False
    r = subprocess.run([*_nft(netns), "-f", "-"], input=RULESET, capture_output=True, text=True)
    return r.returncode == 0


def read(netns: str) -> dict:
    """The counters as server.jsonl fields; empty where there are none."""
    try:
        r = subprocess.run([*_nft(netns), "-j", "list", "counters", "table", "inet", TABLE],
                           capture_output=True, text=True, timeout=5)
        items = json.loads(r.stdout)["nftables"] if r.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError):
        return {}
    return {f"{c['name']}_bytes": c["bytes"] for item in items if (c := item.get("counter"))
            and c.get("name") in COUNTERS}
