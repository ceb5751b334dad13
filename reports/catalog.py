"""Every metric sfubench reports, declared once. The tables, the CSV/JSON exports, the results
database, the trend, Prometheus's names and the docs' metric list iterate these declarations; a test
fails when any of them (or the Grafana dashboard) names a metric that is not here. Adding a metric
is one entry here plus its measurement.

Two kinds:
- a `Figure` is a number per participant count (the series: a row per count, from the windows) and,
  where `history` says so, per run (the headline the results database keeps and trends follow);
- a `Field` is a live per-stream sample field, exposed to Prometheus as it is measured.

    python -m reports.catalog --markdown     # docs/metrics.md
"""
from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str                  # key of series rows, the headline and the results database
    column: str                # its column's title, unit included
    unit: str                  # the unit shown
    scale: float = 1.0         # stored value x scale = shown value
    digits: int = 1
    series: bool = True        # a column of the measurements by participant count
    better: int = 0            # +1 higher is better, -1 lower: the results database tracks it
    at_target: bool = False    # measured at target load: not the SFU's when that window was client-bound
    floor: float = 0.0         # the least change worth flagging, in the stored unit (trend bands)
    trend: str = ""            # the title of its plot in trend.html; empty: not plotted there
    help: str = ""
    source: str = ""           # where a run's at-target figure comes from (metrics.headline): streams
                               # (stats.stream_stats of the windows), quality, playback; else its own
    spread: bool = False       # a mean over the target's observations: its PERCENTILES are kept too

    @property
    def tracked(self) -> bool:
        return self.better != 0


@dataclass(frozen=True)
class Field:
    name: str                  # the sample's field (docs/contracts.md's sample schema)
    prometheus: str            # its series name
    kind: str                  # counter | gauge
    help: str


MBPS = 1e-6
# of a spread figure's observations at target, beside its mean: `<name>_<p>` in the headline
PERCENTILES = ("p50", "p90", "p95", "p99", "max")

FIGURES = (
    Figure("participants", "Participants", "participants", digits=0, better=1, help="participants started"),
    Figure("send_bps", "Send video (Mbps)", "Mbps", MBPS, 3, better=1, at_target=True, floor=20_000,
           trend="Sent bitrate at target", source="streams", spread=True, help="video bitrate each sender sent, per stream"),
    Figure("recv_bps", "Recv video per stream (Mbps)", "Mbps", MBPS, 3, better=1, at_target=True, floor=20_000,
           trend="Received bitrate at target", source="streams", spread=True, help="video bitrate received, per stream"),
    Figure("recv_total_bps", "Recv video per participant (Mbps)", "Mbps", MBPS, 3, better=1, at_target=True,
           floor=100_000, source="streams", spread=True, help="video bitrate each participant received, all its streams"),
    Figure("rtt_send_ms", "Sender RTT (ms)", "ms", digits=1, better=-1, at_target=True, floor=1,
           trend="Sender RTT at target", source="streams", spread=True, help="round-trip time from remote-inbound-rtp of sent video"),
    Figure("rtt_recv_ms", "Receiver RTT (ms)", "ms", digits=1, better=-1, at_target=True, floor=1,
           source="streams", spread=True, help="round-trip time of the receivers' candidate pairs"),
    Figure("fps", "Recv fps", "fps", digits=1, better=1, at_target=True, floor=1,
           source="streams", spread=True, help="frames per second of received video (getStats)"),
    Figure("loss_pct", "Recv loss (%)", "%", digits=2, better=-1, at_target=True, floor=0.1,
           source="streams", help="received video packets lost"),
    Figure("jitter_ms", "Recv jitter (ms)", "ms", digits=1, better=-1, at_target=True, floor=1,
           source="streams", spread=True, help="interarrival jitter of received video"),
    Figure("nacks_per_s", "NACKs / stream-s", "per stream-second", digits=2, better=-1, at_target=True,
           floor=0.1, source="streams", spread=True, help="NACKs the receivers sent per received video stream and second: "
           "how much the SFU's forwarding had to be repaired"),
    Figure("freezes_per_min", "Freezes / stream-min", "per stream-minute", digits=2, better=-1, at_target=True,
           floor=0.1, trend="Freezes at target", source="streams", help="received video freezes (getStats freezeCount)"),
    Figure("brisque", "BRISQUE", "score", digits=1, better=-1, at_target=True, floor=1,
           trend="BRISQUE at target (lower is better)", source="quality", help="no-reference quality of received frames"),
    Figure("vmaf", "VMAF", "score", digits=1, better=1, at_target=True, floor=1, trend="VMAF at target",
           source="quality", help="full-reference quality of received frames against the source frame their code names"),
    Figure("psnr", "PSNR (dB)", "dB", digits=1, better=1, at_target=True, floor=0.5,
           source="quality", help="full-reference PSNR of received frames"),
    Figure("delay_ms", "Delay median (ms)", "ms", digits=0, better=-1, at_target=True, floor=5,
           trend="Delay at target (median)", source="playback", help="glass-to-glass delay, from the sender's camera to the receiver"),
    Figure("check_pass_rate", "Checks passed (%)", "%", 100, 1, better=1, at_target=True, floor=0.02,
           trend="Video checks passed", help="share of the video checks that found the video playing"),
    Figure("sfu_cpu", "SFU CPU (cores)", "cores", digits=3, help="the SFU's CPU"),
    Figure("sfu_rss", "SFU RSS (MB)", "MB", MBPS, 0, help="the SFU's resident memory"),
    Figure("clients_cpu_per_participant", "Browser CPU / participant (cores)", "cores", digits=3,
           help="the clients' CPU per participant"),
    Figure("fwd_pps", "Forwarded packets/s", "packets/s", digits=0, help="packets the receivers got"),
    Figure("sfu_us_per_packet", "SFU CPU per packet (µs)", "µs", digits=2,
           help="the SFU's CPU per forwarded packet"),
    Figure("sfu_mhz_per_stream", "SFU MHz per forwarded stream", "MHz", digits=2,
           help="the SFU's CPU, in MHz of its machine's clock, per forwarded stream"),
    # per run only: the results database and the trend
    Figure("coped", "Load coped with", "participants", digits=0, series=False, better=1,
           trend="Load coped with (last count before the knee)",
           help="the last participant count measured before the knee (or the most reached)"),
    Figure("knee", "Knee", "participants", digits=0, series=False, better=1, help="the knee's participant count"),
    Figure("server_cpu_per_participant", "SFU CPU / participant", "% of one core", 100, 3, series=False, better=-1,
           at_target=True, floor=0.0005, trend="SFU CPU per participant", help="the SFU's CPU per participant at target"),
    Figure("client_cpu_per_participant", "Client CPU / participant", "% of one core", 100, 3, series=False,
           better=-1, at_target=True, floor=0.01, help="the clients' CPU per participant at target"),
    Figure("client_bound", "Client-bound", "flag", digits=0, series=False, better=-1,
           help="1 when the clients, not the SFU, limited the run"),
)

FIELDS = (
    Field("bytes", "sfubench_stream_bytes_total", "counter", "Bytes sent or received on the RTP stream."),
    Field("packets", "sfubench_stream_packets_total", "counter", "Packets sent or received on the RTP stream."),
    Field("packetsLost", "sfubench_stream_packets_lost_total", "counter", "Packets lost (as reported for the stream)."),
    Field("jitter", "sfubench_stream_jitter_seconds", "gauge", "Interarrival jitter."),
    Field("rtt", "sfubench_stream_rtt_seconds", "gauge",
          "Round-trip time (remote-inbound-rtp for sent streams, candidate pair for received ones)."),
    Field("framesPerSecond", "sfubench_stream_frames_per_second", "gauge", "Frames per second (video)."),
    Field("frameHeight", "sfubench_stream_frame_height_pixels", "gauge", "Frame height (video)."),
    Field("freezeCount", "sfubench_stream_freezes_total", "counter", "Video freezes (received video)."),
    Field("totalFreezesDuration", "sfubench_stream_freeze_seconds_total", "counter", "Time spent frozen."),
    Field("nackCount", "sfubench_stream_nacks_total", "counter", "NACKs."),
    Field("pliCount", "sfubench_stream_plis_total", "counter", "Picture loss indications."),
    Field("targetBitrate", "sfubench_stream_target_bitrate_bits_per_second", "gauge", "Encoder target bitrate."),
    Field("availableOutgoingBitrate", "sfubench_stream_available_outgoing_bitrate_bits_per_second", "gauge",
          "Available outgoing bitrate of the candidate pair."),
)
PARTICIPANTS = Field("participants", "sfubench_participants", "gauge", "Participants started.")

BY_NAME = {f.name: f for f in FIGURES}


def series() -> tuple[Figure, ...]:
    return tuple(f for f in FIGURES if f.series)


def percentiles(figures=FIGURES) -> dict[str, Figure]:
    """`<figure>_<p>` -> its figure, for each spread figure of `figures` and each of PERCENTILES."""
    return {f"{f.name}_{p}": f for f in figures if f.spread for p in PERCENTILES}


def tracked() -> tuple[Figure, ...]:
    """What the results database keeps per run, and the trend judges."""
    return tuple(f for f in FIGURES if f.tracked)


def prometheus_names() -> set[str]:
    return {f.prometheus for f in (*FIELDS, PARTICIPANTS)}


def markdown() -> str:
    lines = ["# Metrics", "", "Generated from `reports/catalog.py` by `python -m reports.catalog --markdown`; "
             "do not edit by hand.", "", "## Figures", "",
             "Per participant count (the report's measurements table, `table-series.csv`) and, where "
             "tracked, per run (the results database, `sfubench trend`). A figure with percentiles is a "
             f"mean over the target window's observations; its {', '.join(PERCENTILES)} are kept beside it "
             "(the headline of `tables.json`, thresholds such as `fps.p50>=13`, the results database), "
             "and at each participant count (the report's percentiles table, `table-percentiles.csv`). "
             "With a Pushgateway, a run pushes every figure at target once it is complete, as "
             "`sfubench_result{figure=\"NAME\",stat=\"mean|p50|…|max\"}` (a group of its own, labelled "
             "`result=\"target\"` beside sfu, run and instance).", "",
             "| name | column | unit | series | tracked | percentiles | meaning |", "|---|---|---|---|---|---|---|"]
    for f in FIGURES:
        track = {1: "higher is better", -1: "lower is better"}.get(f.better, "")
        lines.append(f"| `{f.name}` | {f.column} | {f.unit} | {'yes' if f.series else ''} | {track} | "
                     f"{'yes' if f.spread else ''} | {f.help} |")
    lines += ["", "## Live fields (Prometheus)", "",
              "One series per stream, labelled sfu, run, room, user, peer, direction, kind, ssrc.", "",
              "| sample field | series | type | meaning |", "|---|---|---|---|"]
    for f in (*FIELDS, PARTICIPANTS):
        lines.append(f"| `{f.name}` | `{f.prometheus}` | {f.kind} | {f.help} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        print("usage: python -m reports.catalog --markdown", file=sys.stderr)
        sys.exit(2)
    print(markdown(), end="")
