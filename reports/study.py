"""The study's comparison (`sfubench study`): every SFU's runs of one scenario side by side, in the
2018 study's form — its Fig. 3–4 curves (bitrate, RTT, quality, delay against participants), Tables
IV–VI, each SFU's knee with its spread over the repeats and the server's cost per forwarded stream —
with the study's published figures beside ours as reference rows.

Ranking respects noise (confidence.py): an SFU ranks above another only where the 95 % bootstrap
interval of the difference of their repeats' medians leaves out zero (knees and costs alike);
otherwise they are level at this resolution and share a rank. Client-bound runs say nothing of their SFU's knee and are never ranked.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import compare, export, html, layers, plotting, price, reference, restart, scenario, storm, tables
from .confidence import Span, ranks, verdicts
from .audio import AudioKneeRule
from .knee import KneeRule
from .metrics import Analysis
from .table import Column, Table

FIGURES = ("fig-cmp-bitrate", "fig-cmp-rtt", "fig-cmp-quality", "fig-cmp-delay", "fig-cmp-audio", "fig-cmp-checks",
           "fig-cmp-server")
# and table-study-layers where the runs published layers
TABLES = ("table-knees", "table-study-audio", "table-study-cost", "table-study-price", "table-cmp-table4",
          "table-cmp-table5", "table-cmp-table6", "table-study2018")

# Tables IV–VI side by side: the columns the 2018 study published, and its key for each
REFERENCE_COLUMNS = {
    "cmp-table4": {"Sent avg (Mbps)": "ramp_sent_mbps", "Sender RTT avg (ms)": "ramp_rtt_ms",
                   "Sender RTT > 50 ms (%)": "ramp_rtt_over_50_pct"},
    "cmp-table5": {"Received avg (Mbps)": "ramp_received_mbps"},
    "cmp-table6": {"Sent avg (Mbps)": "target_sent_mbps", "Sender RTT avg (ms)": "target_rtt_ms",
                   "Received avg (Mbps)": "target_received_mbps"},
}


@dataclass
class Entry:
    """One SFU of the study: the analyses of its finished runs, how many were asked for, and why
    it has fewer (an install that failed, a crash, an SFU that runs in the cloud only)."""
    sfu: str
    analyses: list[Analysis] = field(default_factory=list)
    asked: int = 0
    why: list[str] = field(default_factory=list)
    version: str | None = None     # the adapter's, and when it was released: what was compared
    released: str | None = None

    def version_cell(self) -> str | None:
        return f"{self.version} ({self.released})" if self.version and self.released else self.version


def knee_span(e: Entry, audio: bool = False) -> Span | None:
    """The SFU's knee (`audio`: its audio knee) over its runs that measured it: a run with no knee
    bounds it from below (above the participants it reached: narrowed down, a knee could lie at any
    count past them, not only at the next room), one that stopped on a knee counts it (Knee.judged);
    a client-bound run measured the clients, and counts not."""
    values, open_above = [], False
    for a in e.analyses:
        knee = a.audio_knee if audio else a.knee
        if knee.client_bound or a.knee.client_bound:
            continue
        if knee.judged is not None:
            values.append(knee.judged)
        else:
            values.append(a.headline["participants"] or 0)
            open_above = True
    return Span(tuple(values), open_above) if values else None


def per_vcpu(e: Entry) -> Span | None:
    """The SFU's knees over the cores of budget its runs had: participants per vCPU (price.py)."""
    cores = next((a.ident["config"].get("sfu_cpus") for a in e.analyses), None)
    return price.per_vcpu(knee_span(e), cores)


def profile(e: Entry) -> str | None:
    return next((a.run.meta["sfu"].get("profile") for a in e.analyses if isinstance(a.run.meta.get("sfu"), dict)),
                None)


def coped(a: Analysis) -> set[int]:
    """The participant counts a run measured with the SFU coping and the clients with headroom."""
    bound = {h["participants"] for h in a.health if h.get("client_bound")}
    limit = a.knee.judged if a.knee.judged is not None else float("inf")
    return {r["participants"] for r in a.cost if r["participants"] < limit and r["participants"] not in bound}


def common_load(entries: list[Entry]) -> int | None:
    """The most participants every run of every SFU measured while coping: where costs compare. A run
    that coped with no count at all (it gave way at its first) is left out, not let empty the rest."""
    sets = [s for e in entries for a in e.analyses if (s := coped(a))]
    shared = set.intersection(*sets) if sets else set()
    return max(shared, default=None)


def cost_span(e: Entry, participants: int | None, key: str, rows: str = "cost") -> Span | None:
    """A figure of the SFU's runs at `participants` where each coped: from their `rows` (the
    analyses' cost rows, or "series")."""
    values = [r[key] for a in e.analyses for r in getattr(a, rows)
              if r["participants"] == participants and r.get(key) is not None and participants in coped(a)]
    return Span(tuple(values)) if values else None


# ---------------------------------------------------------------- tables

def _rank_cell(rank: dict, sfu: str):
    """A rank as the tables show it: level SFUs share it, marked =."""
    return f"={rank[sfu]}" if list(rank.values()).count(rank.get(sfu)) > 1 else rank.get(sfu)


def knee_table(entries: list[Entry], load: int | None) -> Table:
    knees = {e.sfu: knee_span(e) for e in entries}
    rank = ranks(knees)
    cost = {e.sfu: cost_span(e, load, "sfu_us_per_packet") for e in entries}
    rows, keys = [], []
    for e in sorted(entries, key=lambda e: (rank.get(e.sfu, 99), -(knees[e.sfu].middle if knees[e.sfu] else 0))):
        runs = [a.knee for a in e.analyses]
        audience = [viewers_at(a, a.knee.judged) for a in e.analyses]
        per_run = " / ".join("client-bound" if k.client_bound else k.cell() + (f" ({v} viewers)" if v else "")
                             for k, v in zip(runs, audience))
        criteria = sorted({k.criterion for k in runs if k.criterion and not k.client_bound})
        note = "; ".join(e.why)
        if e.analyses and knees[e.sfu] is None:
            note = "; ".join(filter(None, [note, "every run client-bound: the clients, not the SFU, were the limit"]))
        rows.append([_rank_cell(rank, e.sfu), e.sfu, e.version_cell(), f"{len(e.analyses)}/{e.asked}", per_run or None,
                     knees[e.sfu].text() if knees[e.sfu] else None, ", ".join(criteria) or None,
                     cost[e.sfu].text(1) if cost[e.sfu] else None, note or None])
        keys.append(e.sfu)
    for e in entries:
        ref = reference.of(e.sfu)
        if ref:
            rows.append([None, f"{ref['label']} (2018 study)", None, None, None, ref.get("knee"), None, None,
                         "published figure: other hardware, browsers, versions and media"])
            keys.append(f"2018:{e.sfu}")
    return Table("knees", "Each SFU's knee over its repeats", ["rank", "sfu", "sfu_version", "runs", "knee_per_run",
                 "knee_span",
                 "criterion", Column("sfu_us_per_packet", qualifier=f" at {load or '—'}", unit=""), "note"],
                 rows, note="Rank: 1 + the SFUs whose lowest knee is above this one's highest (level SFUs share "
                 "a rank, marked =). A run without a knee bounds it from below (>); one that stopped on a knee its "
                 "target windows then take back counts that knee (unconfirmed). Client-bound runs are not counted.", row_keys=keys)


def audio_table(entries: list[Entry], load: int | None) -> Table:
    """What participants heard: each SFU's audio knee over its repeats, and its received audio's
    MOS and concealment at the load every run coped with."""
    knees = {e.sfu: knee_span(e, audio=True) for e in entries}
    rank = ranks(knees)
    rows = []
    for e in sorted(entries, key=lambda e: (rank.get(e.sfu, 99), -(knees[e.sfu].middle if knees[e.sfu] else 0))):
        runs = [a.audio_knee for a in e.analyses if not a.knee.client_bound]
        at = [cost_span(e, load, key, "series") for key in ("audio_mos", "audio_concealed_pct", "audio_delay_ms")]
        rows.append([_rank_cell(rank, e.sfu), e.sfu, " / ".join(k.cell() for k in runs) or None,
                     knees[e.sfu].text() if knees[e.sfu] else None,
                     ", ".join(sorted({k.criterion for k in runs if k.criterion})) or None,
                     *(span.text(digits) if span else None for span, digits in zip(at, (2, 2, 0)))])
    return Table("study-audio", "What participants heard: each SFU's audio knee over its repeats",
                 ["rank", "sfu", "knee_per_run", "knee_span", "audio_criterion",
                  *(Column(key, qualifier=f" at {load or '—'}") for key in ("audio_mos", "audio_concealed_pct",
                                                                            "audio_delay_ms"))],
                 rows, note=f"{AudioKneeRule().text()} Ranked as the knees are; the figures at the most "
                 "participants every run measured with the SFU coping, median (range) over the repeats.")


def cost_table(entries: list[Entry], load: int | None) -> Table:
    rows = []
    per_packet = {e.sfu: cost_span(e, load, "sfu_us_per_packet") for e in entries}
    rank = ranks(per_packet, higher_is_better=False)
    for e in entries:
        stream = cost_span(e, load, "sfu_mhz_per_stream")
        published = cost_span(e, load, "sfu_mhz_per_published")
        rows.append([rank.get(e.sfu), e.sfu, per_packet[e.sfu].text(1) if per_packet[e.sfu] else None,
                     stream.text(2) if stream else None, published.text(1) if published else None])
    rows.sort(key=lambda r: (r[0] is None, r[0] or 0))
    return Table("study-cost", f"What each SFU spent at {load} participants, over its repeats" if load else
                 "What each SFU spent (no load that every run measured while coping)",
                 ["rank", "sfu", *(Column(key, unit="") for key in ("sfu_us_per_packet", "sfu_mhz_per_stream",
                                                                   "sfu_mhz_per_published"))],
                 rows, note="At the most participants every run of every SFU measured with the SFU coping and "
                 "the clients with headroom, so the costs are of the same load; median (range) over the repeats. "
                 "Ranked only where the ranges part. A run that gave way at its first count has no cost here.")


def side_by_side(entries: list[Entry]) -> list[Table]:
    """Tables IV–VI with a row per SFU (its repeats pooled) and the 2018 study's row beside it."""
    measured = [e for e in entries if e.analyses]
    if not measured:
        return []
    pooled = [tables.study_tables([o for a in e.analyses for o in a.obs]) for e in measured]
    shown = [compare.study_table(pooled, [e.sfu for e in measured], i) for i in range(3)]
    for t in shown:
        for e in measured:
            ref = reference.of(e.sfu)
            if ref:
                t.rows.append([f"{ref['label']} (2018)"] + [ref.get(REFERENCE_COLUMNS[t.id].get(c))
                                                            for c in t.columns[1:]])
    return shown


# ---------------------------------------------------------------- page

def plots(entries: list[Entry], out: Path) -> dict[str, str | None]:
    """The comparison's curves: one colour per SFU, one line per run."""
    runs, names, colors = [], [], []
    for n, e in enumerate(x for x in entries if x.analyses):
        color = plotting.PALETTE[n % len(plotting.PALETTE)]
        for i, a in enumerate(e.analyses):
            runs.append(a)
            names.append(e.sfu if i == 0 else None)
            colors.append(color)
    if not runs:
        return {}
    for old in out.glob("study-*.png"):
        old.unlink()
    return compare.plots(runs, names, out, colors=colors, prefix="study")


def viewers_at(a: Analysis, count: int | None) -> int | None:
    """Of `count` participants of a run, those who only watched (None: a meeting, or no count)."""
    return next((r["viewers"] for r in a.series if r["participants"] == count and r.get("viewers")), None)


def summary(entries: list[Entry], load: int | None, offer: dict | None = None) -> dict:
    """study.json's results: per SFU its runs, knee and spread, cost per stream and, with the
    cloud's `offer`, its price per participant-hour."""
    knees = {e.sfu: knee_span(e) for e in entries}
    rank, audio_rank = ranks(knees), ranks({e.sfu: knee_span(e, audio=True) for e in entries})
    out = {}
    for e in entries:
        k, heard = knees[e.sfu], knee_span(e, audio=True)
        stream, packet = cost_span(e, load, "sfu_mhz_per_stream"), cost_span(e, load, "sfu_us_per_packet")
        out[e.sfu] = {
            "version": e.version, "released": e.released,
            "runs": [str(a.run.path) for a in e.analyses], "asked": e.asked, "why": e.why,
            "knees": [None if a.knee.client_bound else a.knee.judged for a in e.analyses],
            "unconfirmed": [a.knee.participants is None and a.knee.stopped_on is not None for a in e.analyses],
            "viewers_at_knee": [viewers_at(a, a.knee.judged) for a in e.analyses],
            "client_bound": [a.knee.client_bound for a in e.analyses],
            "knee": None if k is None else {"median": k.middle, "min": k.low, "max": None if k.open_above else k.high,
                                            "spread": None if k.open_above else k.high - k.low,
                                            "open_above": k.open_above},
            "rank": rank.get(e.sfu),
            "audio_knees": [None if a.knee.client_bound or a.audio_knee.client_bound else a.audio_knee.judged
                            for a in e.analyses],
            "audio_knee": None if heard is None else {"median": heard.middle, "min": heard.low,
                                                      "max": None if heard.open_above else heard.high,
                                                      "open_above": heard.open_above},
            "audio_rank": audio_rank.get(e.sfu),
            "cost": {"participants": load,
                     "mhz_per_stream": None if stream is None else {"median": stream.middle, "min": stream.low,
                                                                    "max": stream.high},
                     "us_per_packet": None if packet is None else {"median": packet.middle, "min": packet.low,
                                                                   "max": packet.high}},
            "price": price.record(per_vcpu(e), offer) if offer else None,
        }
    return out


def build(entries: list[Entry], out_dir: str | Path, budget: dict | None = None,
          offer: dict | None = None) -> tuple[Path, dict]:
    """report.html (+ images and tables) of the study in `out_dir`; returns its path and study.json's
    results. `budget`: how the SFU budget was sized to the machine (study.json's), if it was;
    `offer`: the cloud's instance types and prices (terraform.offer()), to price a participant-hour."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    measured = [e for e in entries if e.analyses]
    load = common_load(measured)
    figs = plots(entries, out)
    layered = any(layers.layers_asked(a.run.meta) > 1 for e in measured for a in e.analyses)
    storms = storm.study_table({e.sfu: e.analyses for e in measured})
    restarts = restart.study_table({e.sfu: e.analyses for e in measured})
    shown = [knee_table(entries, load), audio_table(entries, load), cost_table(entries, load),
             *([layers.study_table({e.sfu: e.analyses for e in measured}, coped)] if layered else []),
             *([storms] if storms.rows else []), *([restarts] if restarts.rows else []),
             *([price.table([(e.sfu, profile(e), per_vcpu(e)) for e in entries], offer)] if offer else []),
             *side_by_side(entries), reference.table()]
    results = summary(entries, load, offer)
    rule = next((a.rule for e in measured for a in e.analyses), KneeRule())   # a storm study's: StormRule
    words = verdicts({e.sfu: knee_span(e) for e in entries}, rule.name, "higher")
    words += verdicts({e.sfu: knee_span(e, audio=True) for e in entries}, "audio knee", "higher")
    if load:
        words += verdicts({e.sfu: cost_span(e, load, "sfu_us_per_packet") for e in entries},
                          f"CPU per forwarded packet at {load} participants", "lower", higher_is_better=False,
                          digits=1)
    export.write_tables(shown, out, {"results": results, "verdicts": words, "knee_rule": rule.text(),
                                      "audio_knee_rule": AudioKneeRule().text(),
                                      "reference": reference.source(), "budget": budget,
                                      "prices": offer and {"cloud": offer["cloud"], "source": offer["source"],
                                                           "assumption": price.ASSUMPTION}})
    path = out / "report.html"
    path.write_text(render(entries, figs, {t.id: t for t in shown}, words, out, budget), encoding="utf-8")
    return path, results


def _links(entries: list[Entry], out: Path) -> str:
    links = [f'<a href="{html.escape(os.path.relpath(a.run.path / "report.html", out))}">{html.escape(e.sfu)} '
             f"#{i + 1}</a>" for e in entries for i, a in enumerate(e.analyses) if (a.run.path / "report.html").exists()]
    return f'<p class="small">Run reports: {" · ".join(links)}</p>' if links else ""


def render(entries: list[Entry], figs: dict, shown: dict[str, Table], words: list[str], out: Path,
           budget: dict | None = None) -> str:
    first = next((a for e in entries for a in e.analyses), None)
    config = (first.ident["config"] or {}) if first else {}
    machine = (first.ident["machine"] or {}) if first else {}
    per = scenario.per_budget(config)
    repeats = max((e.asked for e in entries), default=0)

    def fig(fid, alt, caption="", missing=""):
        return html.figure(fid, figs.get(fid), alt, caption, missing)

    missing = [f"{e.sfu}: {'; '.join(e.why)}" for e in entries if e.why]
    body = [
        f"<header><h1>SFU study — {len(entries)} SFUs, {repeats} repeat{'s' if repeats != 1 else ''} each</h1>"
        f'<p class="sub" id="scenario">Scenario: {html.escape(scenario.describe(config))}'
        + (f" · knees {html.escape(per)}" if per else "")
        + (f" · machine: {html.escape(str(machine.get('cpus')))} × {html.escape(str(machine.get('cpu_model')))}"
           if machine else "") + "</p>"
        + (f'<p class="sub" id="budget">{html.escape(scenario.sized(budget))}</p>' if budget else "")
        + "</header>",
        html.notes(missing),
        "<h2>Knees</h2>",
        "<ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in words) + "</ul>" if words else
        '<p class="missing">No SFU has a knee measured: nothing to rank.</p>',
        html.table(shown["knees"]),
        html.table(shown["study-layers"]) if "study-layers" in shown else "",
        html.table(shown["study-storms"]) if "study-storms" in shown else "",
        html.table(shown["study-restarts"]) if "study-restarts" in shown else "",
        html.table(shown["study-cost"]),
        html.table(shown["study-price"]) if "study-price" in shown else "",
        "<h2>What participants heard</h2>",
        html.table(shown["study-audio"]),
        fig("fig-cmp-audio", "Audio vs participants, every SFU",
            "Received audio's E-model MOS, concealment and the E-model's delay.", "Audio: not measured."),
        "<h2>Bitrate and round-trip time (the study's Fig. 3)</h2>",
        fig("fig-cmp-bitrate", "Video bitrate vs participants, every SFU",
            "One colour per SFU, one line per run; dashed: each run's knee.", "Bitrate: not measured."),
        fig("fig-cmp-rtt", "RTT vs participants, every SFU", "Sender RTT from remote-inbound-rtp.",
            "RTT: not measured."),
        "<h2>Quality, delay and freezes (the study's Fig. 4)</h2>",
        fig("fig-cmp-quality", "Quality vs participants, every SFU", "Scores of frames the browsers received.",
            "Quality: not measured."),
        fig("fig-cmp-delay", "Delay and freezes vs participants, every SFU", "", "Delay and freezes: not measured."),
        fig("fig-cmp-checks", "Video checks vs participants, every SFU", "", "Video checks: none recorded."),
        fig("fig-cmp-server", "SFU resources vs participants, every SFU", "", "Server CPU: not measured."),
        "<h2>Tables IV–VI, side by side</h2>",
        '<p class="small">Each SFU\'s repeats pooled; the 2018 study\'s published averages below ours where it '
        "measured that SFU (other hardware, browsers, versions and media). Video streams only.</p>",
        *(html.table(shown[t]) for t in ("cmp-table4", "cmp-table5", "cmp-table6") if t in shown),
        html.table(shown["study2018"]),
        _links(entries, out),
        '<p class="small">Downloads: <a href="study.json">study.json</a> · <a href="tables.json">tables.json</a> · '
        + " · ".join(f'<a href="table-{t}.csv">table-{t}.csv</a>' for t in shown) + "</p>",
    ]
    return html.page(f"sfubench study — {', '.join(e.sfu for e in entries)}", "\n".join(b for b in body if b))
