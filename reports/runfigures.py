"""The figures of one run's report (reports/run.py): each a function of the analysis writing
report-<name>.png into the run folder, None where the run has nothing to show."""
from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import MaxNLocator

from . import plotting, tables
from .knee import KneeRule, plateaus
from .metrics import Analysis
from .plotting import KNEE_COLOR, RECV_COLOR, SEND_COLOR, Panel

# ids of the figures a complete run produces (verify.check_rendered can demand them)
FIGURES = ("fig-timeline", "fig-bitrate", "fig-rtt", "fig-quality", "fig-delay", "fig-stream",
           "fig-playback", "fig-checks", "fig-server")


def _minutes(t: float, t0: float) -> float:
    return (t - t0) / 60000.0


def run_span(a: Analysis) -> tuple[float, float] | None:
    """The run's start and end (ms), from its events and windows."""
    tl = a.timeline or [(r["t"], r["participants"]) for r in a.windows]
    if not tl:
        return None
    t0 = next((e["t"] for e in a.run.events if e.get("event") == "run_started"), min(t for t, _ in tl))
    return t0, max([tl[-1][0]] + [e["t"] for e in a.run.events if e.get("t")] + [r["t"] for r in a.windows[-1:]])


def plot_timeline(a: Analysis, out: Path) -> str | None:
    """Participants started, then (where measured) bitrate and RTT of every window, over the run's time."""
    run, w, span = a.run, a.windows, run_span(a)
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
    if x and isinstance(a.rule, KneeRule):   # a storm knee's rule draws no line here
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
    if isinstance(a.rule, KneeRule):
        ax.axhline(a.rule.rtt_ms, color=KNEE_COLOR, linestyle=":", linewidth=1,
                   label=f"{a.rule.rtt_ms:g} ms (knee rule)")
    plotting.annotate_knee(ax, a.knee.participants)
    plotting.ms_log_axis(ax)
    plotting.participants_axis(ax, a.series + a.background)
    ax.set(title="Round-trip time vs participants (log scale)", ylabel="ms")
    ax.legend(loc="upper left")
    plotting.save(fig, out / "report-rtt.png")
    return "report-rtt.png"


def _rows(a: Analysis, panel: Panel) -> list[dict]:
    return [r for r in getattr(a, panel.rows) if r["participants"]]


def _panels(a: Analysis, out: Path, name: str, panels: list[Panel], title: str, audio: bool = False) -> str | None:
    """Side-by-side panels, those with data, the knee marked (`audio`: the audio knee)."""
    panels = [p for p in panels if plotting.column(_rows(a, p), p.key)[0]]
    if not panels:
        return None
    knee = a.audio_knee if audio else a.knee
    if knee.participants is not None:
        title += f" (dashed red: the {'audio knee' if audio else 'knee'}, {knee.participants})"
    fig, axes = plotting.figure(ncols=len(panels), height=3.4, title=title)
    for ax, p in zip(axes, panels):
        rows = _rows(a, p)
        plotting.line_with_band(ax, rows, p.key, p.line, SEND_COLOR, scale=p.scale)
        plotting.faint_points(ax, a.background, p.key, None, SEND_COLOR, scale=p.scale)
        plotting.mark_knee(ax, knee.participants)
        plotting.participants_axis(ax, rows + a.background)
        ax.set(title=p.title, ylabel=p.unit)
        plotting.zero_based(ax)
        if len(ax.get_legend_handles_labels()[0]) > 1:
            ax.legend(loc="upper left")
    plotting.save(fig, out / f"report-{name}.png")
    return f"report-{name}.png"


# The figures that are panels of the series side by side, by name: the figure's title and its panels.
SERIES_PANELS = {
    "quality": ("Received video quality vs participants", [Panel("brisque"), Panel("vmaf"), Panel("psnr")]),
    "delay": ("Delay and freezes vs participants", [
        Panel("delay_ms", line="median"), Panel("freezes_per_min"), Panel("frozen_share", line="share")]),
    "stream": ("Received video streams vs participants (mean and p10–p90 band)", [
        Panel("fps"), Panel("loss_pct", line="pooled"), Panel("jitter_ms")]),
    "playback": ("Every delivered frame's code vs participants", [
        Panel("code_fps"), Panel("skipped_per_s"), Panel("code_freezes_per_min")]),
}


def series_panels(name: str):
    """The plot of the figure SERIES_PANELS names `name`."""
    title, panels = SERIES_PANELS[name]

    def plot(a: Analysis, out: Path) -> str | None:
        return _panels(a, out, name, panels, title)
    return plot


def plot_audio(a: Analysis, out: Path) -> str | None:
    return _panels(a, out, "audio", [Panel("audio_mos"), Panel("audio_visqol"), Panel("audio_concealed_pct", line="pooled"),
                                     Panel("audio_delay_ms"), Panel("audio_mouth_to_ear_ms", line="median")],
                   "What participants hear vs participants", audio=True)


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
    return _panels(a, out, "server", [
        Panel("sfu_cpu", "server"), Panel("sfu_rss", "server"), Panel("sfu_mhz_per_stream", "cost"),
        Panel("sfu_mhz_per_published", "cost"), Panel("clients_cpu_per_participant", "server"),
    ], "Server and browser resources vs participants")


PLOTS = (("fig-timeline", plot_timeline), ("fig-bitrate", plot_bitrate), ("fig-rtt", plot_rtt),
         *((f"fig-{name}", series_panels(name)) for name in SERIES_PANELS),
         ("fig-audio", plot_audio), ("fig-checks", plot_checks), ("fig-server", plot_server))
