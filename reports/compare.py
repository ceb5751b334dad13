"""Several runs (typically one per SFU, same scenario) side by side: compare.html + images + tables."""
from __future__ import annotations

import functools
import os
from pathlib import Path

from . import export, html, metrics, plotting, reference, runfiles, tables
from .knee import KneeRule
from .metrics import Analysis
from .confidence import Span, verdicts
from .plotting import Panel
from .table import Column, Table

FIGURES = ("fig-cmp-bitrate", "fig-cmp-rtt", "fig-cmp-quality", "fig-cmp-delay", "fig-cmp-checks",
           "fig-cmp-server")


class ScenarioMismatch(ValueError):
    """The runs were not made under the same scenario, so setting them side by side would mislead."""


def scenario(ident: dict, defaults: dict | None = None) -> dict:
    """What must match for runs to be comparable (flattened, dotted keys): the settings the run's
    metadata records as its scenario (the settings schema decides which), else its whole config;
    those at their default (the run's recorded defaults, and `defaults`) left out, so that a run made
    before a setting existed matches one that leaves it at its default."""
    chosen = ident.get("scenario")
    flat = dict(html.flatten(chosen if chosen is not None else ident.get("config") or {}))
    defaults = {**(ident.get("scenario_defaults") or {}), **(defaults or {})}
    return {k: v for k, v in flat.items() if k not in defaults or v != defaults[k]}


def shared_defaults(idents: list[dict]) -> dict:
    """Every scenario default any of the runs recorded (the newest schema among them knows most)."""
    out: dict = {}
    for i in idents:
        out.update(i.get("scenario_defaults") or {})
    return out


def scenario_differences(idents: list[dict]) -> list[str]:
    """'key: a / b' for every scenario entry that is not the same in all runs."""
    defaults = shared_defaults(idents)
    flat = [scenario(i, defaults) for i in idents]
    keys = sorted(set().union(*flat)) if flat else []
    return [f"{k}: " + " / ".join(str(f.get(k, "(unset)")) for f in flat)
            for k in keys if len({repr(f.get(k)) for f in flat}) > 1]


def check_comparable(analyses: list[Analysis]) -> None:
    unknown = [a.ident["run"] for a in analyses if not a.ident["config"] and a.ident["scenario"] is None]
    if unknown:
        raise ScenarioMismatch(f"cannot tell whether the scenarios match: no config recorded for "
                               f"{', '.join(unknown)} (use force to compare anyway)")
    diffs = scenario_differences([a.ident for a in analyses])
    if diffs:
        raise ScenarioMismatch(f"runs differ in scenario ({'; '.join(diffs)}); use force to compare anyway")


def labels(analyses: list[Analysis]) -> list[str]:
    """'sfu version', with the run folder added where that is ambiguous (and a number if even that is)."""
    base = [f"{a.ident['sfu']} {a.ident['version'] or ''}".strip() for a in analyses]
    named = [f"{b} ({a.ident['run']})" if base.count(b) > 1 else b for b, a in zip(base, analyses)]
    return [f"{n} #{named[:i].count(n) + 1}" if named.count(n) > 1 else n for i, n in enumerate(named)]


def coped(a: Analysis) -> int:
    """The load an SFU coped with (metrics.coped)."""
    return metrics.coped(a)


def ranked(analyses: list[Analysis]) -> list[int]:
    """Indices best first: load coped with, then received bitrate at target, then check pass rate;
    figures of a client-bound target window do not count."""
    def key(i):
        h = analyses[i].headline
        fair = not h.get("target_client_bound")
        return (-coped(analyses[i]), -((h["recv_bps"] or 0) if fair else 0),
                -((h["check_pass_rate"] or 0) if fair else 0))
    return sorted(range(len(analyses)), key=key)


RANKING_RULE = ("Ranked by the load coped with (the last participant count measured before the knee, or the "
                "participants reached when there is no knee), "
                "then the received bitrate at target, then the share of video checks passed. Client-bound "
                "measurements never count as the SFU's: a run client-bound at N coped with at least the last "
                "count measured below N, and at-target figures of a client-bound target window are left out "
                "of the ranking (shown in brackets).")


def _knee_cell(a: Analysis):
    if a.knee.client_bound:
        return f"client-bound at {a.knee.participants}"
    return a.knee.participants if a.knee.participants is not None else a.knee.cell()   # a number where it is one


def _r(v, scale=1.0, digits=3):
    return None if v is None else round(v * scale, digits)


RANKED = (*(Column(k, brief=True) for k in ("recv_bps", "send_bps", "rtt_send_ms", "brisque", "vmaf", "delay_ms",
                                            "check_pass_rate", "server_cpu_per_participant")),
          Column("sfu_mhz_per_stream", unit=""))


def ranking_table(analyses: list[Analysis], names: list[str]) -> Table:
    rows = []
    for rank, i in enumerate(ranked(analyses), 1):
        a, h = analyses[i], analyses[i].headline
        at = next((r for r in a.cost if r["participants"] == h["target_participants"]), {})
        values = [_r(h["recv_bps"], 1e-6), _r(h["send_bps"], 1e-6), _r(h["rtt_send_ms"], 1, 1),
                  _r(h["brisque"], 1, 1), _r(h["vmaf"], 1, 1), _r(h["delay_ms"], 1, 0),
                  _r(h["check_pass_rate"], 100, 1), _r(h["server_cpu_per_participant"], 100, 3),
                  _r(at.get("sfu_mhz_per_stream"), 1, 2)]   # in RANKED's order
        if h.get("target_client_bound"):
            values = [None if v is None else f"({v})" for v in values]
        rows.append([rank, names[i], _knee_cell(a), h["participants"], *values])
    return Table("ranking", "Ranking (values at target load)",
                 ["rank", "sfu", "knee", "reached", *RANKED], rows,
                 note="Knee and Reached in participants; bitrates per video stream; delay is the median "
                      "glass-to-glass delay; SFU CPU in percent of one core per participant, and in MHz of "
                      "its machine's clock per forwarded stream at target. Values in "
                      "brackets come from a client-bound target window: they describe the clients.")


def study_table(per_run: list[list[Table]], names: list[str], index: int) -> Table:
    """One of Tables IV–VI with a row per run (`per_run`: each run's tables.study_tables): each
    metric's average (and share above the threshold)."""
    first = per_run[0][index]
    columns = ["sfu"]
    for key, row in zip(first.row_keys, first.rows):
        columns.append(Column(key, qualifier=" avg", unit=row[1]))
        if row[6]:
            columns.append(Column(key, qualifier=f" {row[6]}", unit="%"))
    rows = []
    for own, name in zip(per_run, names):
        out = [name]
        for row in own[index].rows:
            out.append(row[5])
            if row[6]:
                out.append(row[7])
        rows.append(out)
    return Table(f"cmp-{first.id}", first.title.replace(" style", ""), columns, rows)


def cost_table(analyses: list[Analysis], names: list[str]) -> Table:
    """The SFUs' CPU per forwarded packet and per forwarded stream at each participant count, side by
    side (cost.cost_series); client-bound counts are marked, as they say less about the SFU."""
    counts = sorted({r["participants"] for a in analyses for r in a.cost})
    columns = ["participants"]
    for n in names:
        columns += [Column(key, unit="", of=n) for key in ("sfu_us_per_packet", "sfu_mhz_per_stream",
                                                            "sfu_mhz_per_published")]
    bound = [{h["participants"] for h in a.health if h.get("client_bound") and h["phase"] != "network"}
             for a in analyses]
    rows = []
    for p in counts:
        row = [p]
        for a, b in zip(analyses, bound):
            r = next((r for r in a.cost if r["participants"] == p), None)
            mark = " (client-bound)" if p in b and r else ""
            row += [None if r is None else f"{r['sfu_us_per_packet']:.1f}{mark}",
                    None if r is None or r.get("sfu_mhz_per_stream") is None else round(r["sfu_mhz_per_stream"], 2),
                    None if r is None or r.get("sfu_mhz_per_published") is None else round(r["sfu_mhz_per_published"], 1)]
        rows.append(row)
    return Table("cmp-cost", "SFU CPU per forwarded packet and stream, side by side", columns, rows,
                 note="Over each count's ramp-up and target windows; a forwarded stream is one published "
                      "track delivered to one receiver; MHz of each run's machine clock.")


REPEAT = ("recv_bps", "send_bps", "rtt_send_ms", "fps", "delay_ms", "server_cpu_per_participant")


def by_sfu(analyses: list[Analysis]) -> dict[str, list[int]]:
    """'sfu version' -> the indices of its runs, in order."""
    groups: dict[str, list[int]] = {}
    for i, a in enumerate(analyses):
        groups.setdefault(f"{a.ident['sfu']} {a.ident['version'] or ''}".strip(), []).append(i)
    return groups


def repeat_table(analyses: list[Analysis]) -> Table:
    """For an SFU run more than once in the comparison (same scenario, by the comparison's rule): its
    knees, and how far each target figure spread over its runs: (max - min) / mean."""
    rows = []
    for name, idx in by_sfu(analyses).items():
        if len(idx) < 2:
            continue
        row = [name, len(idx), " / ".join(analyses[i].knee.cell() for i in idx)]
        for key in REPEAT:
            vals = [v for i in idx if (v := analyses[i].headline.get(key)) is not None]
            mean = sum(vals) / len(vals) if vals else 0
            row.append(round(100 * (max(vals) - min(vals)) / mean, 1) if len(vals) > 1 and mean else None)
        rows.append(row)
    return Table("repeat", "Repeatability: the same SFU and scenario, run again",
                 ["sfu", "runs", "knees", *(Column(key, qualifier=" spread", unit="%") for key in REPEAT)], rows,
                 note="Spread: (max - min) / mean of the figure at target over the SFU's runs. A difference "
                      "between SFUs smaller than their runs' own spread is noise.")


def repeat_sentence(table: Table) -> str:
    """The widest spread of repeated runs, in one sentence, or "" when no SFU was run twice."""
    spreads = [(v, table.columns[j]) for row in table.rows for j, v in enumerate(row) if j > 2 and v is not None]
    if not spreads:
        return ""
    worst, column = max(spreads)
    return (f"Repeated runs of the same SFU differed by up to {worst:g} % ({column.replace(' spread (%)', '')}); "
            "differences between SFUs smaller than that are noise.")


def differences(analyses: list[Analysis]) -> list[str]:
    """Between SFUs of the comparison, when one was run more than once: whether the loads they coped
    with differ beyond their runs' noise (confidence.py), in words. A run with no knee, or one
    that the clients stopped, coped with at least its load: its SFU's span is open above."""
    groups = {name: [analyses[i] for i in idx] for name, idx in by_sfu(analyses).items()}
    if len(groups) < 2 or all(len(g) < 2 for g in groups.values()):
        return []
    spans = {name: Span(tuple(coped(a) for a in g),
                        open_above=any(a.knee.judged is None or a.knee.client_bound for a in g))
             for name, g in groups.items()}
    return verdicts(spans, "load coped with", "higher")


def versions_table(analyses: list[Analysis], names: list[str]) -> tuple[Table, list[str]]:
    """Versions, options, machine and config per run; the classes mark rows that differ."""
    per_run = []
    for a in analyses:
        i = a.ident
        items = {"SFU version": i["version"], "SFU released": i["released"], "Chrome version": i["chrome"],
                 "git sha": (i["git_sha"] or "")[:12],
                 "status": a.headline["status"] or "unfinished"}
        items.update({f"sfu option {k}": v for k, v in html.flatten(i["options"])})
        items.update({f"machine.{k}": v for k, v in html.flatten(i["machine"])})
        items.update({f"config.{k}": v for k, v in html.flatten(i["config"])})
        per_run.append(items)
    keys = list(dict.fromkeys(k for items in per_run for k in items))
    rows = [[k] + [items.get(k) for items in per_run] for k in keys]
    classes = ["diff" if len({repr(r) for r in row[1:]}) > 1 else "" for row in rows]
    return Table("versions", "Versions and configuration (differences highlighted)",
                 ["field", *(Column("run_value", of=n) for n in names)], rows), classes


# ---------------------------------------------------------------- overlay plots

def _overlay(analyses, names, out: Path, name: str, panels: list[tuple], title: str, height: float = 3.8,
             log: bool = False, hline: tuple | None = None, colors: list | None = None,
             prefix: str = "compare") -> str | None:
    """Panels (plotting.Panel); one line per run, knees dashed. `colors`: one per run (default: one
    each); a run whose name is None draws without a legend entry."""
    panels = [p for p in panels if any(plotting.column(getattr(a, p.rows), p.key)[0] for a in analyses)]
    if not panels:
        return None
    colors = colors or [plotting.PALETTE[n % len(plotting.PALETTE)] for n in range(len(analyses))]
    fig, axes = plotting.figure(ncols=len(panels), height=height, title=title)
    for ax, p in zip(axes, panels):
        for a, label, color in zip(analyses, names, colors):
            rows = [r for r in getattr(a, p.rows) if r["participants"]]
            if plotting.line_with_band(ax, rows, p.key, label, color, scale=p.scale, band=False) and not a.knee.client_bound:
                plotting.mark_knee(ax, a.knee.participants, color=color)
        plotting.participants_axis(ax, [r for a in analyses for r in getattr(a, p.rows)])
        if hline:
            ax.axhline(hline[0], color="#555", linestyle=":", linewidth=1, label=hline[1])
        if log:
            plotting.ms_log_axis(ax)
        else:
            plotting.zero_based(ax)
        ax.set(title=p.title, ylabel=p.unit)
    axes[0].legend(loc="best")
    plotting.save(fig, out / f"{prefix}-{name}.png")
    return f"{prefix}-{name}.png"


def plots(analyses: list[Analysis], names: list, out: Path, **style) -> dict[str, str | None]:
    """The overlays of the comparison; `style`: _overlay's colors and prefix."""
    o = functools.partial(_overlay, analyses, names, out, **style)
    return {
        "fig-cmp-bitrate": o("bitrate", [Panel("recv_bps"), Panel("send_bps")],
                             "Video bitrate vs participants (dashed: each SFU's knee)", height=4.2),
        "fig-cmp-rtt": o("rtt", [Panel("rtt_send_ms", note=" (log scale)")],
                         "Round-trip time vs participants", log=True, hline=(tables.RTT_THRESHOLD_MS, "50 ms")),
        "fig-cmp-quality": o("quality", [Panel("brisque"), Panel("vmaf"), Panel("psnr")],
                             "Received video quality vs participants", height=3.6),
        "fig-cmp-delay": o("delay", [Panel("delay_ms", note=" (median)"), Panel("freezes_per_min")],
                           "Delay and freezes vs participants", height=3.6),
        "fig-cmp-audio": o("audio", [Panel("audio_mos"), Panel("audio_visqol"), Panel("audio_concealed_pct"),
                                     Panel("audio_delay_ms")],
                           "What participants hear vs participants", height=3.6),
        "fig-cmp-checks": o("checks", [Panel("check_pass_rate")], "Video checks passed vs participants", height=3.4),
        "fig-cmp-server": o("server", [Panel("sfu_cpu", "server"), Panel("sfu_rss", "server"),
                                       Panel("sfu_cpu_per_participant", "server")],
                            "SFU server resources vs participants", height=3.6),
    }


# ---------------------------------------------------------------- page

def build(run_dirs: list[str | Path], out_dir: str | Path, force: bool = False,
          rule: KneeRule = KneeRule()) -> Path:
    """Write compare.html (+ images and tables) into out_dir; ScenarioMismatch unless the scenarios match
    or force is set."""
    run_dirs = [Path(d) for d in run_dirs]
    if not run_dirs:
        raise ValueError("nothing to compare: no run folders given")
    analyses = [metrics.analyse(runfiles.load(d), rule) for d in run_dirs]
    if not force:
        check_comparable(analyses)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("compare-*.png"):
        old.unlink()
    names = labels(analyses)
    figs = plots(analyses, names, out)
    versions, version_classes = versions_table(analyses, names)
    shown = [ranking_table(analyses, names)] + [study_table([a.tables for a in analyses], names, i) for i in range(3)] + \
        [versions, reference.table(), cost_table(analyses, names), repeat_table(analyses)]
    export.write_tables(shown, out, {"runs": {n: {"path": str(a.run.path), "headline": a.headline,
                                                   "knee": vars(a.knee)} for n, a in zip(names, analyses)},
                                      "knee_rule": rule.text(), "ranking_rule": RANKING_RULE,
                                      "differences": differences(analyses)})
    path = out / "compare.html"
    path.write_text(render(analyses, names, figs, shown, version_classes, force, rule, out), encoding="utf-8")
    return path


def _report_links(analyses: list[Analysis], names: list[str], out: Path) -> str:
    links = [f'<a href="{html.escape(os.path.relpath(a.run.path / "report.html", out))}">{html.escape(n)}</a>'
             for n, a in zip(names, analyses) if (a.run.path / "report.html").exists()]
    return f'<p class="small">Run reports: {" · ".join(links)}</p>' if links else ""


def render(analyses: list[Analysis], names: list[str], figs: dict, shown: list[Table], version_classes: list[str],
           forced: bool, rule: KneeRule, out: Path) -> str:
    by_id = {t.id: t for t in shown}
    best = ranked(analyses)[0]
    diffs = scenario_differences([a.ident for a in analyses])
    warn = []
    if forced and diffs:
        warn.append("Compared with force although the scenarios differ: " + "; ".join(diffs))
    for a, n in zip(analyses, names):
        status = a.headline["status"]
        if status != "ok":
            how = f"finished with status '{status}'" if status else "did not finish"
            warn.append(f"{n}: the run {how}; its curves stop where its data stops.")
        if a.run.missing:
            warn.append(f"{n}: not measured — {', '.join(a.run.missing)} missing.")

    def fig(fid, alt, caption="", missing=""):
        return html.figure(fid, figs.get(fid), alt, caption, missing)

    knees = "".join(f"<li><b>{html.escape(n)}</b>: "
                    + (f"knee at {a.knee.participants} participants — {html.escape(a.knee.detail)}"
                       if a.knee.participants is not None else html.escape(a.knee.detail)) + "</li>"
                    for n, a in zip(names, analyses))
    first = analyses[0].ident
    scenario_line = ", ".join(f"{k} {v}" for k, v in html.flatten(first.get("scenario") or first.get("config") or {})
                              if k in ("rooms", "users_per_room", "media.profile", "participants_per_browser"))
    body = [
        f"<header><h1>SFU comparison — {len(analyses)} runs</h1>"
        f'<p class="sub">{html.escape(", ".join(names))}'
        + (f" · {html.escape(scenario_line)}" if scenario_line else "") + "</p></header>",
        html.notes(warn),
        "<h2>Ranking</h2>",
        f'<p>Best: <b>{html.escape(names[best])}</b>. {html.escape(RANKING_RULE)}</p>',
        html.table(by_id["ranking"], ["best"] + [""] * (len(analyses) - 1)),
        (f"<p>{html.escape(repeat_sentence(by_id['repeat']))}</p>" + html.table(by_id["repeat"])
         if by_id["repeat"].rows else ""),
        ('<ul id="differences">' + "".join(f"<li>{html.escape(w)}</li>" for w in differences(analyses)) + "</ul>"
         if by_id["repeat"].rows else ""),
        f'<div class="rule"><ul>{knees}</ul><span class="small">Rule: {html.escape(rule.text())}</span></div>',
        "<h2>Bitrate and round-trip time</h2>",
        fig("fig-cmp-bitrate", "Video bitrate vs participants, all runs",
            "Mean per video stream over ramp-up and target windows (Δbytes × 8000 / Δt).",
            "Bitrate: no samples in any run."),
        fig("fig-cmp-rtt", "RTT vs participants, all runs", "Sender RTT from remote-inbound-rtp.",
            "RTT: no samples in any run."),
        "<h2>Quality, delay and freezes</h2>",
        fig("fig-cmp-quality", "Quality vs participants, all runs", "", "Quality: not measured in any run."),
        fig("fig-cmp-delay", "Delay and freezes vs participants, all runs", "", "Delay and freezes: not measured."),
        "<h2>Video checks</h2>",
        fig("fig-cmp-checks", "Video checks passed vs participants, all runs",
            "Share of checks passing, by the participant count when they ran.", "Video checks: none recorded."),
        "<h2>Server</h2>",
        fig("fig-cmp-server", "Server resources vs participants, all runs", "From each run's server.jsonl.",
            "Server CPU and memory: not measured in any run (no server.jsonl)."),
        html.table(by_id["cmp-cost"]) if by_id["cmp-cost"].rows else "",
        "<h2>Tables IV–VI, side by side</h2>",
        '<p class="small">Averages over all values; shares above the study\'s thresholds (bitrate &gt; 1 Mbps, '
        "RTT &gt; 50 ms). Video streams only.</p>",
        html.table(by_id["cmp-table4"]), html.table(by_id["cmp-table5"]), html.table(by_id["cmp-table6"]),
        html.table(by_id["study2018"]),
        "<h2>Versions and configuration</h2>",
        html.table(by_id["versions"], version_classes, cls="kv"),
        _report_links(analyses, names, out),
        '<p class="small">Downloads: <a href="tables.json">tables.json</a> · '
        + " · ".join(f'<a href="table-{t.id}.csv">table-{t.id}.csv</a>' for t in shown) + "</p>",
    ]
    return html.page(f"sfubench comparison — {', '.join(names)}", "\n".join(b for b in body if b))
