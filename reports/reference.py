"""The 2018 study's published figures (reports/cosmo-2018.toml, with their source), for context beside
our own: a table of their own, and a reference row per SFU for the study's comparison."""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

from .table import Table

DATA = Path(__file__).with_name("cosmo-2018.toml")

# the table's columns: each a catalogue entry, the published figure kept under the key it names
KEYS = ("label", "participants", "checks_pct", "ramp_sent_mbps", "ramp_rtt_ms", "ramp_rtt_over_50_pct",
        "ramp_received_mbps", "target_sent_mbps", "target_rtt_ms", "target_received_mbps", "knee")


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
                 [f"{key}_2018" for key in KEYS], [[row.get(key) for key in KEYS] for row in data()["sfus"]],
                 note=f"Knees as the study describes them: {data()['source']['knees']}. Source: {source()}")
