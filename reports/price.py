"""What a participant-hour would cost on the cloud's instances: each SFU's knee per core of its
budget, as participants per vCPU, over the prices of the instance types its Terraform environment
offers (`sfubench/cloud/terraform.py`'s `offer()`: prices.json, with their source and date).

Prices are per 1,000 participant-hours: a participant-hour costs fractions of a cent. A knee that
only bounds the SFU from below (a run that did not reach it) gives a price that bounds from above.
"""
from __future__ import annotations

from .confidence import Span, number
from .table import Column, Table

PER = 1000   # participant-hours a price is given for
ASSUMPTION = ("A knee measured on a share of one core is taken per vCPU: it scales to a host's vCPUs only for an "
              "SFU that uses every core (a worker or event loop per core, the tuned profiles the study runs; "
              "LiveKit's Go runtime by itself), and a cloud run that measured a host's knee would replace it.")


def per_vcpu(knees: Span | None, cores: float | None) -> Span | None:
    """Participants per vCPU from the knees measured on `cores` of SFU budget."""
    if knees is None or not cores:
        return None
    return Span(tuple(k / cores for k in knees.values), knees.open_above)


def hourly(participants: Span, usd_hour: float, vcpus: int) -> dict:
    """The price of PER participant-hours on one instance: `median`, `min`, `max` over the repeats
    (the fewest participants per vCPU give the highest price); where a run did not reach its knee,
    only `at_most`: the price at the participants it did reach."""
    prices = sorted(PER * usd_hour / (vcpus * p) for p in participants.values if p > 0)
    if not prices or participants.open_above:
        return {"median": None, "min": None, "max": None, "at_most": prices[-1] if prices else None}
    return {"median": Span(tuple(prices)).middle, "min": prices[0], "max": prices[-1], "at_most": None}


def cell(price: dict) -> str | None:
    if price["at_most"] is not None:
        return f"< {number(price['at_most'], 3)}"
    if price["median"] is None:
        return None
    low, mid, high = (number(price[k], 3) for k in ("min", "median", "max"))
    return mid if low == high else f"{mid} ({low}–{high})"


def record(participants: Span | None, offer: dict) -> dict | None:
    """study.json's price of one SFU: participants per vCPU and the price on every instance type."""
    if participants is None:
        return None
    return {"participants_per_vcpu": {"median": participants.middle, "min": participants.low,
                                      "max": None if participants.open_above else participants.high},
            f"usd_per_{PER}_participant_hours": {t: hourly(participants, i["usd_hour"], i["vcpus"])
                                                  for t, i in offer["instances"].items()}}


def table(rows: list[tuple[str, str | None, Span | None]], offer: dict) -> Table:
    """`rows`: per SFU its name, the profile its runs used and its participants per vCPU."""
    types = list(offer["instances"])
    out = []
    for sfu, profile, participants in rows:
        prices = record(participants, offer)
        out.append([sfu, profile, participants.text(0) if participants else None,
                    *((cell(prices[f"usd_per_{PER}_participant_hours"][t]) if prices else None) for t in types)])
    return Table("study-price", f"What {PER:,} participant-hours would cost, over the repeats",
                 ["sfu", "sfu_profile", "participants_per_vcpu",
                  *(Column("usd_per_participant_hours", qualifier=f" on {t}", unit="") for t in types)],
                 out, note=f"{ASSUMPTION} Median (range) over the repeats, USD per {PER:,} participant-hours, "
                 f"on-demand. Prices: {offer['source']}.")
