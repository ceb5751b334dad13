"""The 2018 study's published figures (reports/cosmo-2018.toml, with their source), for context beside
our own: a table of their own, and a reference row per SFU for the study's comparison."""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

from .table import Table

DATA = Path(__file__).with_name("cosmo-2018.toml")

# column title -> key of a [[sfus]] table
COLUMNS = {"SFU (2018 version)": "label", "Participants at target": "participants", "Checks passed (%)": "checks_pct",
           "Ramp-up sent (Mbps, avg)": "ramp_sent_mbps", "Ramp-up sender RTT (ms, avg)": "ramp_rtt_ms",
           "Ramp-up RTT > 50 ms (%)": "ramp_rtt_over_50_pct", "Ramp-up received (Mbps, avg)": "ramp_received_mbps",
           "Target sent (Mbps, avg)": "target_sent_mbps", "Target sender RTT (ms, avg)": "target_rtt_ms",
           "Target received (Mbps, avg)": "target_received_mbps", "Knee (participants)": "knee"}


@functools.cache
def data() -> dict:
    return tomllib.loads(DATA.read_text())


def source() -> str:
    s = data()["source"]
    return f"{s['title']}, {s['where']}. Setup: {s['setup']}; {s['caps']}."


def of(sfu: str) -> dict | None:
    """The 2018 figures of sfubench's adapter `sfu`, if the study measured that SFU."""
    return next((row for row in data()["sfus"] if row.get("sfu") == sfu), None)


def table() -> Table:
    return Table("study2018", "The 2018 study's published figures (different hardware, browsers and SFU versions)",
                 list(COLUMNS), [[row.get(key) for key in COLUMNS.values()] for row in data()["sfus"]],
                 note=f"Knees as the study describes them: {data()['source']['knees']}. Source: {source()}")
