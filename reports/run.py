"""One run's report: report.html + report-*.png + tables (CSV/JSON), written into the run folder."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from matplotlib.ticker import MaxNLocator

from . import (clientbound, export, html, layers, metrics, plotting, runfiles, scenario, table, tables, thresholds,
               traffic)
from .knee import KneeRule, plateaus
from .metrics import Analysis
from .plotting import KNEE_COLOR, RECV_COLOR, SEND_COLOR

# ids of the figures a complete run produces (verify.check_rendered can demand them)
FIGURES = ("fig-timeline", "fig-bitrate", "fig-rtt", "fig-quality", "fig-delay", "fig-stream",
           "fig-playback", "fig-checks", "fig-server")


def _minutes(t: float, t0: float) -> float:
    return (t - t0) / 60000.0


def _span(a: Analysis) -> tuple[float, float] | None:
    """The run's start and end (ms), from its events and windows."""
    tl = a.timeline or [(r["t"], r["participants"]) for r in a.windows]
    if not tl:
        return None
    t0 = next((e["t"] for e in a.run.events if e.get("event") == "run_started"), min(t for t, _ in tl))
    return t0, max([tl[-1][0]] + [e["t"] for e in a.run.events if e.get("t")] + [r["t"] for r in a.windows[-1:]])


def plot_timeline(a: Analysis, out: Path) -> str | None:
    """Participants started, then (where measured) bitrate and RTT of every window, over the run's time."""
    run, w, span = a.run, a.windows, _span(a)
    if span is None:
        return None
    tl = a.timeline or [(r["t"], r["participants"]) for r in w]
    t0, t_end = span
    wanted = {"bitrate": ("send_bps", "recv_bps"), "rtt": ("rtt_send_ms",)}
    panels = ["participants"] + [k for k, keys in wanted.items() if any(r.get(c) for r in w for c in keys)]
    fig, axes = plotting.rows(len(panels), title="The run over time")
    ax = axes[0]
    x = [_minutes(t, t0) for t, _ in tl] + [_minutes(t_end, t0)]
    y = [p for _, p in tl] + [tl[-1][1]]
    ax.step(x, y, where="post", color=SEND_COLOR, linewidth=1.8, label="participants started")
    for event, marker, color, label in (("room_timeout", "x", "#d62728", "room timed out"),
                                        ("participant_failed", "o", "#ff7f0e", "participant failed"),
                                        ("sfu_exited", "X", "#000000", "SFU exited / stopped answering")):
        pts = [(_minutes(e["t"], t0), e.get("participants") or 0) for e in run.events
               if e.get("event") == event and e.get("t")]
        if pts:
            ax.scatter(*zip(*pts), marker=marker, color=color, s=28, zorder=3, label=label)
    for ax_ in axes:
        for e in run.events:
            if e.get("event") == "target_reached":
                ax_.axvline(_minutes(e["t"], t0), color="#2ca02c", linestyle=":",
                            label="target reached" if ax_ is ax else None)
            if e.get("event") == "run_finished":
                ax_.axvline(_minutes(e["t"], t0), color="#555", linestyle=":",
                            label=f"finished ({e.get('status')})" if ax_ is ax else None)
            if e.get("event") == "network_changed":
                ax_.axvline(_minutes(e["t"], t0), color="#9467bd", linestyle="--", linewidth=1)
                if ax_ is axes[-1]:
                    ax_.annotate(f"network: {e.get('network')}", (_minutes(e["t"], t0), 1), xycoords=("data", "axes fraction"),
                                 rotation=90, va="top", ha="right", fontsize=7, color="#9467bd")
    ax.set(title="Participants started", ylabel="participants")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    measured = [r for r in w if r["phase"] != "background"]
    if "bitrate" in panels:
        ax = axes[panels.index("bitrate")]
        for key, color, label in (("send_bps", SEND_COLOR, "sent"), ("recv_bps", RECV_COLOR, "received")):
            pts = [(_minutes(r["t"], t0), r[key]) for r in w if r.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), color=color, linewidth=1.2, label=f"{label} (every window)")
            pts = [(_minutes(r["t"], t0), r[key]) for r in measured if r.get(key) is not None]
            if pts:
                ax.scatter(*zip(*pts), color=color, s=16, zorder=3, label=f"{label}, ramp-up / target")
        ax.set(title="Video bitrate per stream (mean)", ylabel="Mbps")
        plotting.mbps_axis(ax)
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower left", ncols=2)
    if "rtt" in panels:
        ax = axes[panels.index("rtt")]
        pts = [(_minutes(r["t"], t0), r["rtt_send_ms"]) for r in w if r.get("rtt_send_ms")]
        ax.plot(*zip(*pts), color=SEND_COLOR, linewidth=1.2, label="sender RTT (mean)")
        ax.axhline(tables.RTT_THRESHOLD_MS, color="#555", linestyle=":", linewidth=1, label="50 ms")
        plotting.ms_log_axis(ax)
        ax.set(title="Sender round-trip time (log scale)", ylabel="ms")
        ax.legend(loc="upper left")
    axes[-1].set_xlabel("minutes since the run started")
    plotting.save(fig, out / "report-timeline.png")
    return "report-timeline.png"


def plot_bitrate(a: Analysis, out: Path) -> str | None:
    fig, (ax,) = plotting.figure(height=4.2)
    drawn = plotting.line_with_band(ax, a.series, "send_bps", "sent, per stream (mean, p10–p90 band)", SEND_COLOR)
    drawn |= plotting.line_with_band(ax, a.series, "recv_bps", "received, per stream (mean, p10–p90 band)",
                                     RECV_COLOR)
    background = plotting.faint_points(ax, a.background, "send_bps", "sent, background ticks", SEND_COLOR)
    background |= plotting.faint_points(ax, a.background, "recv_bps", "received, background ticks", RECV_COLOR)
    if not (drawn or background):
        plotting.plt.close(fig)
        return None
    x, y = plotting.column(a.series, "recv_bps")
    if x:
        ax.plot(x, [a.rule.bitrate_fraction * p for p in plateaus(y)], linestyle=":", color=KNEE_COLOR,
                linewidth=1, label=f"{a.rule.bitrate_fraction:.0%} of the receive plateau (knee rule)")
    plotting.annotate_knee(ax, a.knee.participants)
    plotting.participants_axis(ax, a.series + a.background)
    ax.set(title="Video bitrate per stream vs participants", ylabel="Mbps")
    plotting.mbps_axis(ax)
    plotting.zero_based(ax)
    ax.legend(loc="lower left")
    plotting.save(fig, out / "report-bitrate.png")
    return "report-bitrate.png"


def plot_rtt(a: Analysis, out: Path) -> str | None:
    fig, (ax,) = plotting.figure(height=4.0)
    drawn = plotting.line_with_band(ax, a.series, "rtt_send_ms", "sender (remote-inbound-rtp), mean and p10–p90",
                                    SEND_COLOR)
    drawn |= plotting.line_with_band(ax, a.series, "rtt_recv_ms", "receiver (candidate pair), mean", RECV_COLOR,
                                     band=False)
    drawn |= plotting.faint_points(ax, a.background, "rtt_send_ms", "sender, background ticks", SEND_COLOR)
    if not drawn:
        plotting.plt.close(fig)
        return None
    ax.axhline(tables.RTT_THRESHOLD_MS, color="#555", linestyle=":", linewidth=1, label="50 ms (study's threshold)")
    ax.axhline(a.rule.rtt_ms, color=KNEE_COLOR, linestyle=":", linewidth=1, label=f"{a.rule.rtt_ms:g} ms (knee rule)")
    plotting.annotate_knee(ax, a.knee.participants)
    plotting.ms_log_axis(ax)
    plotting.participants_axis(ax, a.series + a.background)
    ax.set(title="Round-trip time vs participants (log scale)", ylabel="ms")
    ax.legend(loc="upper left")
    plotting.save(fig, out / "report-rtt.png")
    return "report-rtt.png"


def _panels(a: Analysis, out: Path, name: str, panels: list[tuple], title: str) -> str | None:
    """Side-by-side panels of (rows, key, panel title, y label, scale, line label) — those with data."""
    panels = [p for p in panels if plotting.column(p[0], p[1])[0]]
    if not panels:
        return None
    if a.knee.participants is not None:
        title += f" (dashed red: the knee, {a.knee.participants})"
    fig, axes = plotting.figure(ncols=len(panels), height=3.4, title=title)
    for ax, (rows, key, ptitle, ylabel, scale, label) in zip(axes, panels):
        plotting.line_with_band(ax, rows, key, label, SEND_COLOR, scale=scale)
        plotting.faint_points(ax, a.background, key, None, SEND_COLOR, scale=scale)
        plotting.mark_knee(ax, a.knee.participants)
        plotting.participants_axis(ax, rows + a.background)
        ax.set(title=ptitle, ylabel=ylabel)
        plotting.zero_based(ax)
        if len(ax.get_legend_handles_labels()[0]) > 1:
            ax.legend(loc="upper left")
    plotting.save(fig, out / f"report-{name}.png")
    return f"report-{name}.png"


def plot_quality(a: Analysis, out: Path) -> str | None:
    s = a.series
    return _panels(a, out, "quality", [
        (s, "brisque", "BRISQUE (lower is better)", "score", 1, "mean"),
        (s, "vmaf", "VMAF (higher is better)", "score", 1, "mean"),
        (s, "psnr", "PSNR (higher is better)", "dB", 1, "mean"),
    ], "Received video quality vs participants")


def plot_delay(a: Analysis, out: Path) -> str | None:
    s = a.series
    return _panels(a, out, "delay", [
        (s, "delay_ms", "Glass-to-glass delay", "ms", 1, "median"),
        (s, "freezes_per_min", "Freezes (getStats)", "per stream-minute", 1, "mean"),
        (s, "frozen_share", "Frozen frames (scored)", "% of scored frames", 100, "share"),
    ], "Delay and freezes vs participants")


def plot_stream(a: Analysis, out: Path) -> str | None:
    s = a.series
    return _panels(a, out, "stream", [
        (s, "fps", "Frame rate received", "fps", 1, "mean"),
        (s, "loss_pct", "Packet loss received", "%", 1, "pooled"),
        (s, "jitter_ms", "Jitter received", "ms", 1, "mean"),
    ], "Received video streams vs participants (mean and p10–p90 band)")


def plot_playback(a: Analysis, out: Path) -> str | None:
    s = a.series
    return _panels(a, out, "playback", [
        (s, "code_fps", "Frames delivered (frame code)", "fps", 1, "mean"),
        (s, "skipped_per_s", "Source frames skipped", "per second", 1, "mean"),
        (s, "code_freezes_per_min", "Freezes (frame code)", "per stream-minute", 1, "mean"),
    ], "Every delivered frame's code vs participants")


def plot_checks(a: Analysis, out: Path) -> str | None:
    if not a.rooms:
        return None
    fig, (ax,) = plotting.figure(height=3.8, bottom=0.95)
    numeric = all(isinstance(r["room"], int) for r in a.rooms)
    x = [r["room"] if numeric else i for i, r in enumerate(a.rooms)]
    verdicts = sorted({v for r in a.rooms for v in r["verdicts"]},
                      key=lambda v: (list(plotting.VERDICT_COLORS).index(v) if v in plotting.VERDICT_COLORS else 99))
    bottom = [0] * len(x)
    for v in verdicts:
        heights = [r["verdicts"].get(v, 0) for r in a.rooms]
        ax.bar(x, heights, bottom=bottom, width=0.85, color=plotting.VERDICT_COLORS.get(v, "#bbb"),
               label=f"{v} ({sum(heights)})")
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_ylim(0, max(bottom) * 1.08 or 1)
    if numeric:   # room numbers on a scale of at least ten rooms, so one room is not one wide block
        ax.set_xlim(min(x) - 0.7, max(max(x) + 0.7, min(x) + 9.3))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        ax.set_xticks(x, [str(r["room"]) for r in a.rooms])
    ax.set(title="Video checks per room (a check passes when the video is playing)", xlabel="room",
           ylabel="checks")
    ax.legend(loc="upper left", ncols=len(verdicts), bbox_to_anchor=(0, -0.16))
    plotting.save(fig, out / "report-checks.png")
    return "report-checks.png"


def plot_server(a: Analysis, out: Path) -> str | None:
    rows = [r for r in a.server if r["participants"]]
    return _panels(a, out, "server", [
        (rows, "sfu_cpu", "SFU CPU", "cores", 1, "mean"),
        (rows, "sfu_rss", "SFU memory (RSS)", "MB", 1e-6, "mean"),
        (a.cost, "sfu_mhz_per_stream", "SFU per forwarded\nstream", "MHz", 1, "mean"),
        (a.cost, "sfu_mhz_per_published", "SFU per published\nstream", "MHz", 1, "mean"),
        (rows, "clients_cpu_per_participant", "Browser CPU per\nparticipant", "cores", 1, "mean"),
    ], "Server and browser resources vs participants")


PLOTS = (("fig-timeline", plot_timeline), ("fig-bitrate", plot_bitrate), ("fig-rtt", plot_rtt),
         ("fig-quality", plot_quality), ("fig-delay", plot_delay), ("fig-stream", plot_stream),
         ("fig-playback", plot_playback), ("fig-checks", plot_checks), ("fig-server", plot_server))


# ---------------------------------------------------------------- page

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
    h, k = a.headline, a.knee
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
    items = [("SFU", ident["sfu"]), ("SFU version", ident["version"]), ("SFU installed", sfu.get("installed")),
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


def render(a: Analysis, figs: dict[str, str | None], shown: dict[str, table.Table]) -> str:
    k = a.knee

    def fig(fid: str, alt: str, caption: str = "", missing: str = "") -> str:
        return html.figure(fid, figs.get(fid), alt, caption, missing)

    per = scenario.per_budget(a.ident["config"] or {})
    if k.client_bound:
        knee_text = f"<b>Client-bound at {k.participants} participants</b> — {html.escape(k.detail)}."
    elif k.participants is not None:
        knee_text = (f"<b>Knee at {k.participants} participants{' ' + html.escape(per) if per else ''}</b> — "
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
        *(layers.section(layers.layers_asked(a.run.meta), shown, fig, _collapsed) if "layers" in shown else ()),
        "<h2>Video codecs</h2>" + html.table(shown["codecs"]) if shown["codecs"].rows else "",
        "<h2>Video checks</h2>",
        fig("fig-checks", "Video checks per room", "", "Video checks: none recorded."),
        _collapsed(shown["checks"], f"Show the {len(a.rooms)} rooms", 15),
        "<h2>Server and browsers</h2>",
        fig("fig-server", "Server and browser resources vs participants",
            "From the CPU probes (server.jsonl): CPU time of the SFU's and the browsers' process trees.",
            "Server CPU and memory: not measured (no server.jsonl)."),
        html.key_values("cpu", "CPU at target load (meta.json)", cpu_rows) if cpu_rows else "",
        html.table(shown["cost"]) if shown["cost"].rows else "",
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
    shown["series"] = tables.series_table(a.series)
    shown["percentiles"] = tables.percentiles_table(a.series)
    shown["health"] = tables.health_table(a.health)
    shown["cost"] = tables.cost_table(a.cost)
    shown["traffic"] = tables.traffic_table(a.cost)
    shown["clients"] = tables.kind_table(a.obs, a.run.playback, a.run.checks, a.run.events)
    shown["codecs"] = tables.codec_table(a.obs)
    net = a.run.meta.get("network") if isinstance(a.run.meta.get("network"), dict) else {}
    shown["network"] = tables.network_table(a.obs, a.run.playback, a.run.events, str(net.get("name") or "plain"),
                                             a.health, a.run.server)
    if layers.layers_asked(a.run.meta) > 1:
        layers.add(a, _span(a), shown, figs, run_dir)
    export.write_tables(list(shown.values()), run_dir,
                        {"headline": a.headline, "knee": vars(a.knee), "knee_rule": a.rule.text(),
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
