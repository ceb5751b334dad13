"""One run's report: report.html + report-*.png + tables (CSV/JSON), written into the run folder."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from . import audio, clientbound, export, html, layers, metrics, runfiles, restart, scenario, storm, table, tables, thresholds, traffic
from .knee import KneeRule
from .metrics import Analysis
from .runfigures import FIGURES, PLOTS, run_span   # FIGURES: the ids of a complete report's figures (verify.py)


def _notes(a: Analysis) -> list[str]:
    run, h, out = a.run, a.headline, []
    if "meta.json" in run.missing:
        out.append("meta.json is missing or unreadable: versions and configuration are unknown.")
    explain = {"samples.jsonl": "no getStats samples: bitrate, RTT and stream figures are not measured.",
               "checks.jsonl": "no video checks were recorded.",
               "events.jsonl": "no events: the participants timeline is taken from the samples.",
               "quality.jsonl": "quality (BRISQUE, VMAF, PSNR), glass-to-glass delay and frozen frames: not measured.",
               "server.jsonl": "server and browser CPU and memory: not measured (no probe data)."}
    out += [f"{name} missing — {text}" for name, text in explain.items() if name in run.missing]
    for w in run.discarded.values():
        out.append(f"A {w.get('phase')} window at {w.get('participants')} participants was left out "
                   f"({w['discarded']})" + ("." if w.get("phase") == "background" else "; it was measured again."))
    for name, bad in run.damaged.items():
        out.append(f"{name}: {bad} unreadable line{'s' if bad > 1 else ''} skipped (a run cut short leaves a "
                   "partial last line).")
    if h["status"] is None and run.events:
        out.append("No run_finished event: the run did not finish (crashed or still running); "
                   "the report shows what was recorded.")
    elif h["status"] not in (None, "ok"):
        out.append(f"The run finished with status '{h['status']}'.")
    if a.windows and h["target_participants"] is None:
        out.append("Target load was never measured: the target columns and Table VI are empty.")
    if run.meta.get("error"):
        out.append(f"The run stopped on an error: {run.meta['error']}")
    q = run.quality
    if q and all(r.get("vmaf") is None for r in q):
        what = "VMAF" if any(r.get("psnr") is not None for r in q) else "VMAF / PSNR / SSIM"
        out.append(f"{what}: not measured.")
    # values that cannot be right: say so rather than let an average hide them
    scored = [r["brisque"] for r in q if r.get("brisque") is not None]
    zeros = sum(1 for b in scored if b == 0)
    if zeros > len(scored) / 10:
        out.append(f"BRISQUE is 0 for {zeros} of {len(scored)} scored frames: blank or flat frames score 0 "
                   "(\"perfect\"), so the BRISQUE figures are not trustworthy for this run.")
    return out + traffic.anomalies(a.cost)


def _cards(a: Analysis) -> str:
    h, k, heard = a.headline, a.knee, a.audio_knee
    target = h["target_participants"]
    passed = sum(r["passed"] for r in a.rooms)
    quality = " · ".join(x for x in (
        f"VMAF {h['vmaf']:.1f}" if h["vmaf"] is not None else "",
        f"PSNR {h['psnr']:.1f} dB" if h["psnr"] is not None else "") if x) or "BRISQUE: lower is better"
    server = h["server_cpu_per_participant"]
    return html.cards([
        ("Participants", str(h["participants"] or 0),
         f"target measured at {target}" if target else "target load not reached", ""),
        ("Knee", str(k.participants) if k.participants is not None else "none",
         {"bitrate": "receive bitrate fell", "rtt": "RTT climbed", "freezes": "freezes climbed",
          "checks": "video checks failed", "streams": "streams failed",
          "client": "client-bound: the load generator, not the SFU"}.get(k.criterion,
                                                                          "coped with every load measured"),
         "knee" if k.participants is not None else ""),
        ("Received video at target", html.fmt_bps(h["recv_bps"]),
         f"per stream · sent {html.fmt_bps(h['send_bps'])}" if h["send_bps"] is not None else "", ""),
        ("Sender RTT at target", html.fmt_ms(h["rtt_send_ms"]),
         f"receiver {html.fmt_ms(h['rtt_recv_ms'])}" if h["rtt_recv_ms"] is not None else "", ""),
        ("Video checks passed", html.fmt_pct(h["check_pass_rate"]), f"{passed} of {h['checks']} checks", ""),
        ("BRISQUE at target", html.fmt_num(h["brisque"]), quality, ""),
        ("Delay at target", html.fmt_ms(h["delay_ms"]),
         f"{h['freezes_per_min']:.2f} freezes / stream-min" if h["freezes_per_min"] is not None else "", ""),
        ("SFU CPU per participant", f"{server * 100:.2f} %" if server is not None else "not measured",
         "of one core, at target" if server is not None else "no CPU probe data", ""),
        ("Audio knee", str(heard.participants) if heard.participants is not None else "none",
         {"audio_mos": "E-model MOS fell", "concealment": "concealment climbed",
          "client": "client-bound: the load generator, not the SFU"}.get(heard.criterion,
                                                                          "heard well at every load measured"),
         "knee" if heard.participants is not None else ""),
        ("Audio MOS at target", html.fmt_num(h["audio_mos"], 2), " · ".join(x for x in (
            f"ViSQOL {h['audio_visqol']:.2f}" if h["audio_visqol"] is not None else "",
            f"{h['audio_concealed_pct']:.1f} % concealed" if h["audio_concealed_pct"] is not None else "") if x)
         or "E-model (G.107)", ""),
    ])


def _header(a: Analysis) -> str:
    ident, h, run = a.ident, a.headline, a.run
    status = h["status"]
    badge = ("ok" if status == "ok" else "bad") if status else "unknown"
    ts = [e["t"] for e in run.events if e.get("t")] or [w["t"] for w in a.windows]
    when = ""
    if ts:
        when = (f" · {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(min(ts) / 1000))}"
                f" · {(max(ts) - min(ts)) / 60000:.0f} min")
    title = f"{ident['sfu']} {ident['version'] or ''}".strip()
    net = run.meta.get("network") if isinstance(run.meta.get("network"), dict) else None
    link = (f" · network <b>{html.escape(str(net.get('name')))}</b> ({html.escape(_link_text(net))})"
            if net else " · network: the lab's plain link")
    group = net.get("synthetic") if net and isinstance(net.get("synthetic"), dict) else None
    if group:
        link += (f" · synthetic participants' network <b>{html.escape(str(group.get('name')))}</b> "
                 f"({html.escape(_link_text(group))})")
    config = ident["config"] or {}
    return (f"<header><h1>{html.escape(title)} — {h['participants'] or 0} participants</h1>"
            f'<p class="sub">run <code>{html.escape(ident["run"])}</code> · '
            f'<span class="status {badge}">{html.escape(status or "unfinished")}</span>{when}'
            f" · Chrome {html.escape(str(ident['chrome'] or 'unknown'))}{link}</p>"
            + (f'<p class="sub" id="scenario">Scenario: {html.escape(scenario.describe(config))}</p>' if config else "")
            + (f'<p class="sub" id="budget">{html.escape(scenario.sized(run.meta.get("budget")))}</p>'
               if run.meta.get("budget") else "")
            + "</header>")


def _link_text(net: dict) -> str:
    """A network profile in a few words: each direction's delay, jitter, loss and rate."""
    def one(d: dict) -> str:
        d = d if isinstance(d, dict) else {}
        parts = [f"{d.get('delay_ms', 0):g} ms"]
        if d.get("jitter_ms"):
            parts.append(f"± {d['jitter_ms']:g} ms")
        if d.get("loss_pct"):
            parts.append(f"{d['loss_pct']:g} % loss" + (f" in bursts of {d['burst']:g}" if d.get("burst", 0) > 1 else ""))
        if d.get("rate_kbps"):
            parts.append(f"{d['rate_kbps']:g} kbit/s")
        return " ".join(parts)
    return f"up {one(net.get('up'))}; down {one(net.get('down'))}"


def _meta(a: Analysis) -> str:
    ident, run = a.ident, a.run
    sfu = run.meta.get("sfu") if isinstance(run.meta.get("sfu"), dict) else {}
    items = [("SFU", ident["sfu"]), ("SFU version", ident["version"]), ("SFU released", ident["released"]),
             ("SFU installed", sfu.get("installed")),
             ("SFU options", ", ".join(f"{k}={v}" for k, v in ident["options"].items()) or None),
             ("Chrome version", ident["chrome"]), ("git sha", ident["git_sha"]),
             ("status", run.meta.get("status")), ("error", run.meta.get("error"))]
    items += [(f"media.{k}", v) for k, v in html.flatten(ident["media"])]
    items += [(f"machine.{k}", v) for k, v in html.flatten(ident["machine"])]
    present = [f.name for f in sorted(run.path.iterdir()) if f.suffix in (".jsonl", ".json") and
               f.name != "tables.json"]
    items += [("files", ", ".join(present)), ("files missing", ", ".join(run.missing) or None)]
    out = html.key_values("meta", "Run", items)
    if ident["config"]:
        out += html.key_values("config", "Configuration (meta.json config)", html.flatten(ident["config"]))
    return out


def _collapsed(t: table.Table, summary: str, longer_than: int) -> str:
    """The table, folded away when it has more than `longer_than` rows; nothing when it has none."""
    if not t.rows:
        return ""
    if len(t.rows) <= longer_than:
        return html.table(t)
    return f"<details><summary>{html.escape(summary)}</summary>{html.table(t)}</details>"


def _audio_knee_text(a: Analysis) -> str:
    k = a.audio_knee
    if k.client_bound:
        return f"<b>No audio knee below the clients' limit</b> — {html.escape(k.detail)}."
    if k.participants is not None:
        return f"<b>Audio knee at {k.participants} participants</b> — {html.escape(k.detail)}."
    return f"<b>No audio knee</b>: {html.escape(k.detail)}."


def render(a: Analysis, figs: dict[str, str | None], shown: dict[str, table.Table]) -> str:
    k = a.knee

    def fig(fid: str, alt: str, caption: str = "", missing: str = "") -> str:
        return html.figure(fid, figs.get(fid), alt, caption, missing)

    per = scenario.per_budget(a.ident["config"] or {})
    if k.client_bound:
        knee_text = f"<b>Client-bound at {k.participants} participants</b> — {html.escape(k.detail)}."
    elif k.participants is not None:
        coped = f" ({k.coped} coped)" if k.coped is not None else ""
        audience = next((r["viewers"] for r in a.series if r["participants"] == k.participants and r.get("viewers")), None)
        who = f", {audience} of them viewers" if audience else ""
        knee_text = (f"<b>{k.of.capitalize()} at {k.participants} participants{who}{coped}{' ' + html.escape(per) if per else ''}</b> — "
                     f"{html.escape(k.detail)}.")
    else:
        stopped = next((e["reason"] for e in a.run.events
                        if e.get("event") == "target_reached" and e.get("reason")), None)
        knee_text = (f"<b>No knee</b>: {html.escape(k.detail)}"
                     + (f"; the load stopped: {html.escape(stopped)}" if stopped else "") + ".")
    cpu_names = {"sfu_cores": "SFU, cores", "sfu_per_participant": "SFU, cores per participant",
                 "clients_cores": "browsers, cores", "clients_per_participant": "browsers, cores per participant"}
    cpu_rows = [(cpu_names.get(key, key), v) for key, v in html.flatten(a.ident["cpu"])]
    body = [
        _header(a), _cards(a), thresholds.section((a.run.meta.get("thresholds") or {}).get("verdicts") or []),
        html.notes(_notes(a)),
        f'<div class="rule" id="clients"><b>{html.escape(clientbound.sentence(a.health))}</b><br>'
        f'<span class="small">Rule: {html.escape(a.client_rule.text())}</span></div>',
        _collapsed(shown["health"], f"Show the load generator's health in the {len(a.health)} windows", 0),
        "<h2>Load</h2>",
        fig("fig-timeline", "The run over time",
            "Participants started (from the events); mean video bitrate and sender RTT of every measurement "
            "window, background ticks included.", "The run over time: no events or samples."),
        *(("<h2>Join storms</h2>", f'<div class="rule">{knee_text}</div>', html.table(shown["storms"]))
          if shown["storms"].rows else ()),
        *(("<h2>Planned restart</h2>", html.table(shown["restart"])) if shown["restart"].rows else ()),
        "<h2>Bitrate and round-trip time</h2>",
        f'<div class="rule">{knee_text}<br><span class="small">Rule: {html.escape(a.rule.text())}</span></div>',
        fig("fig-bitrate", "Video bitrate vs participants",
            "Bitrate = Δbytes × 8000 / Δt between a window's first and last samples of each stream (the study's "
            "formula). Lines: ramp-up and target windows; faint points: background ticks.",
            "Bitrate: not measured (no samples)."),
        fig("fig-rtt", "RTT vs participants", "Sender RTT from remote-inbound-rtp; receiver RTT from the selected "
            "candidate pair.", "RTT: not measured (no samples)."),
        "<h2>Quality, delay and freezes</h2>",
        fig("fig-quality", "Quality vs participants", "Scores of captured received frames (quality.jsonl).",
            "Quality: not measured (no quality.jsonl records)."),
        fig("fig-delay", "Delay and freezes vs participants",
            "Glass-to-glass delay: from the sender's camera capturing a frame code to the receiver "
            "rendering it, for every frame of the measurements (playback.jsonl); freezes from getStats "
            "freezeCount.",
            "Delay and freezes: not measured."),
        fig("fig-stream", "Received stream health vs participants", "",
            "Frame rate, loss and jitter: not measured (no samples)."),
        fig("fig-playback", "Delivered frames vs participants",
            "From the frame code of every frame each receiver got during the measurements "
            "(playback.jsonl): frames delivered per second, source frames that never arrived, "
            "freezes of 0.5 s or more.",
            "Per-frame playback: not measured (no playback.jsonl)."),
        "<h2>Audio</h2>",
        f'<div class="rule">{_audio_knee_text(a)}<br><span class="small">Rule: {html.escape(a.audio_rule.text())}'
        "</span></div>",
        fig("fig-audio", "Audio vs participants",
            "Every received audio stream over the ramp-up and target windows: its E-model MOS (ITU-T G.107), "
            "the samples its jitter buffer concealed, and the E-model's mouth-to-ear delay.",
            "Audio: not measured (no received audio's playout counters in the samples)."),
        html.table(shown["audio"]) if shown["audio"].rows else "",
        *(layers.section(layers.layers_asked(a.run.meta), shown, fig, _collapsed) if "layers" in shown else ()),
        "<h2>Video codecs</h2>" + html.table(shown["codecs"]) if shown["codecs"].rows else "",
        "<h2>Video checks</h2>",
        fig("fig-checks", "Video checks per room", "", "Video checks: none recorded."),
        _collapsed(shown["checks"], f"Show the {len(a.rooms)} rooms", 15),
        _collapsed(shown["first_video"], f"Show the {len(shown['first_video'].rows)} steps' first videos", 15)
        if shown["first_video"].rows else "",
        "<h2>Server and browsers</h2>",
        fig("fig-server", "Server and browser resources vs participants",
            "From the CPU probes (server.jsonl): CPU time of the SFU's and the browsers' process trees.",
            "Server CPU and memory: not measured (no server.jsonl)."),
        html.key_values("cpu", "CPU at target load (meta.json)", cpu_rows) if cpu_rows else "",
        html.table(shown["cost"]) if shown["cost"].rows else "",
        html.table(shown["viewers"]) if shown["viewers"].rows else "",
        html.table(shown["traffic"]) if shown["traffic"].rows else "",
        "<h2>Network profiles</h2>" + html.table(shown["network"]) if shown["network"].rows else "",
        "<h2>Browsers and synthetic participants</h2>" + html.table(shown["clients"])
        if any(r[1] == "synthetic" for r in shown["clients"].rows) else "",
        "<h2>Tables IV–VI, as in the 2018 study</h2>",
        '<p class="small">Per metric: minimum of the values above zero, maximum, average of all values and the share '
        "above the study's thresholds (bitrate &gt; 1 Mbps, RTT &gt; 50 ms). Bitrates: one value per stream and "
        "window; RTTs: one per sample. Video streams only.</p>",
        html.table(shown["table4"]), html.table(shown["table5"]), html.table(shown["table6"]),
        "<h2>All measurements by participant count</h2>",
        _collapsed(shown["series"], f"Show the table ({len(shown['series'].rows)} rows)", 0)
        or '<p class="missing">No measurements.</p>',
        _collapsed(shown["percentiles"], "Show each figure's percentiles by participant count "
                   f"({len(shown['percentiles'].rows)} rows)", 0),
        '<p class="small">Downloads: <a href="tables.json">tables.json</a> · ' +
        " · ".join(f'<a href="table-{t}.csv">table-{t}.csv</a>' for t in shown) + "</p>",
        "<h2>Run metadata</h2>", _meta(a),
    ]
    title = f"sfubench — {a.ident['sfu']} — {a.ident['run']}"
    return html.page(title, "\n".join(b for b in body if b))


def build(run_dir: str | Path, rule: KneeRule = KneeRule()) -> Path:
    """Write report.html, its images and its tables into the run folder; return the report's path."""
    run_dir = Path(run_dir)
    a = metrics.analyse(runfiles.load(run_dir), rule)
    for old in run_dir.glob("report-*.png"):   # a figure that has no data now must not linger
        old.unlink()
    figs = {fid: plot(a, run_dir) for fid, plot in PLOTS}
    shown = {t.id: t for t in a.tables}
    shown["checks"] = tables.rooms_table(a.rooms)
    shown["first_video"] = tables.first_video_table(a.run.checks)
    shown["storms"] = storm.storm_table(a.series)
    shown["viewers"] = tables.viewers_table(a.series)
    shown["restart"] = restart.restart_table(a.run.events)
    shown["series"] = tables.series_table(a.series)
    shown["percentiles"] = tables.percentiles_table(a.series)
    shown["health"] = tables.health_table(a.health)
    shown["cost"] = tables.cost_table(a.cost)
    shown["traffic"] = tables.traffic_table(a.cost)
    shown["clients"] = tables.kind_table(a.obs, a.run.playback, a.run.checks, a.run.events)
    shown["codecs"] = tables.codec_table(a.obs)
    shown["audio"] = audio.audio_table(a.series, {o["client"] for o in a.audio})
    shown["network"] = tables.network_table(a)
    if layers.layers_asked(a.run.meta) > 1:
        layers.add(a, run_span(a), shown, figs, run_dir)
    export.write_tables(list(shown.values()), run_dir,
                        {"headline": a.headline, "knee": vars(a.knee), "knee_rule": a.rule.text(),
                         "audio_knee": vars(a.audio_knee), "audio_knee_rule": a.audio_rule.text(),
                         "client_rule": a.client_rule.text(), "clients": clientbound.sentence(a.health)})
    path = run_dir / "report.html"
    path.write_text(render(a, figs, shown), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m reports.run RUN_DIR", file=sys.stderr)
        return 2
    print(build(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
