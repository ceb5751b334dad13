"""A run's scenario in words, from the settings its meta.json records: what the SFU was given (its
CPU budget and cores), who measured (browsers and synthetic participants), and how long each step
was measured. Reports name it in their headers, so a knee is never read without its budget."""
from __future__ import annotations


def _cores(n: float) -> str:
    return f"{n:g} core" + ("" if n <= 1 else "s")


def budget(config: dict) -> str:
    """The SFU's budget: "0.2 core (10-ms period) on CPU 0", or "" when it had none."""
    cpus, cpuset = config.get("sfu_cpus") or 0, config.get("sfu_cpuset") or ""
    parts = []
    if cpus:
        period = config.get("cpu_period_ms")
        parts.append(_cores(cpus) + (f" ({period:g}-ms CFS period)" if period else ""))
    if cpuset:
        parts.append(f"on CPU {cpuset}")
    return " ".join(parts)


def per_budget(config: dict) -> str:
    """How a knee is read: "per 0.2 core of SFU", or "" without a budget."""
    cpus = config.get("sfu_cpus") or 0
    return f"per {_cores(cpus)} of SFU" if cpus else ""


def sized(budget: dict | None) -> str:
    """How a calibrated budget was sized (meta.json's and study.json's `budget`), as a sentence, or ""."""
    if not budget:
        return ""
    clients, cheapest = budget.get("clients") or {}, budget.get("cheapest")
    cost = (budget.get("costs") or {}).get(cheapest) or {}
    which = ", the cheapest SFU" if len(budget.get("costs") or {}) > 1 else ""
    busy = f", their cores {clients['busy']:.0%} busy" if clients.get("busy") is not None else ""
    return (f"The SFU budget, {budget['cores']:g} core, is sized to this machine: its clients carry "
            f"{'at least ' * bool(clients.get('at_least'))}{clients.get('participants')} participants beside the browser ({clients.get('streams')} streams "
            f"received, the generator's pacing p99 {clients.get('pacing_ms_p99', 0):.2f} ms{busy}), and {cheapest}"
            f"{which} ({cost.get('us_per_packet', 0):.1f} µs a forwarded packet at the light load), is expected "
            f"to give way near {cost.get('expected_knee', 0):.0f} participants ({budget.get('rule')})")


def mix(config: dict) -> str:
    """Who the participants were: "rooms of 7: 2 browsers in room 1, the rest synthetic"."""
    per_room, rooms = config.get("users_per_room"), config.get("real_rooms")
    real = min(config.get("real_per_room", per_room) or 0, per_room or 0)
    head = f"rooms of {per_room}"
    publishers = config.get("publishers_per_room") or 0
    if 0 < publishers < (per_room or 0):   # the first participants publish, the others only watch
        head = (f"rooms of {publishers} publisher{'s' if publishers > 1 else ''} and up to "
                f"{per_room - publishers} viewers")
    if rooms is None or (real >= (per_room or 0) and rooms >= 1000):
        return head + ", every participant a browser"
    if not rooms or not real:
        return head + ", every participant synthetic"
    where = "room 1" if rooms == 1 else "every room" if rooms >= 1000 else f"rooms 1–{rooms}"
    browsers = f"{real} browser{'s' if real > 1 else ''}"
    return head + f": {browsers} in {where}, the rest synthetic"


def windows(config: dict) -> str:
    """How each step was measured: "each room settled 5 s, then measured over 10 s"."""
    n, interval = config.get("ramp_samples"), config.get("sample_interval") or 1.0
    if not n:
        return ""
    settle = config.get("settle") or 0
    span = (n - 1) * interval
    return (f"each room settled {settle:g} s, then measured over {span:g} s" if settle
            else f"each room measured over {span:g} s")


def describe(config: dict) -> str:
    """The scenario in one line."""
    parts = [mix(config), windows(config)]
    codec = str(config.get("codec") or "vp8").upper()   # runs from before --codec published VP8
    if (config.get("simulcast") or 1) > 1:
        asked = {"smallest": ", every participant asking for the smallest",
                 "half": ", every participant asking for the half",
                 "tile": ", every participant asking for its tile's layer",
                 "mix": ", the even-numbered participants asking for the smallest"}.get(config.get("receive_layer"), "")
        n = config["simulcast"]
        kind = f"SVC: {n} {codec} spatial layers (L{n}T3_KEY)" if config.get("svc") else f"simulcast: {n} {codec} layers"
        parts.append(f"{kind} per browser publisher{asked}")
    else:
        parts.append(f"{codec} video")
    sfu = budget(config)
    parts.append(f"SFU budget {sfu}" if sfu else "SFU unconfined")
    profile = config.get("sfu_profile")
    if profile:
        parts.append("SFU profile auto (tuned where the adapter has one)" if profile == "auto"
                     else f"SFU profile {profile}")
    if config.get("client_cpuset"):
        parts.append(f"clients on CPU {config['client_cpuset']}")
    if config.get("shape"):
        parts.append(f"shape {config['shape']}")
    return " · ".join(p for p in parts if p)
