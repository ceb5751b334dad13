"""Every figure and column sfubench shows, declared once. The tables (their column titles and
units), the plots (their panel titles and units), the comparisons, the CSV/JSON exports, the results
database, the trend, Prometheus's names and the docs' metric list iterate these declarations: a
table cannot show a column that is not here (reports/table.py refuses it), and a test fails when
any of them (or the Grafana dashboard) names one that is not. Adding a metric is one entry here plus
its measurement.

Three kinds:
- a `Figure` is a number per participant count (the series: a row per count, from the windows) and,
  where `better` says so, per run (the headline the results database keeps and trends follow);
  STEP_FIGURES are measured per step only (the SFU's cost, the layers), shown in their own tables;
- a `Label` is a column that is no measured figure: what a row is about (a count, an SFU, a
  window), a verdict or a note;
- a `Field` is a live per-stream sample field, exposed to Prometheus as it is measured.

    python -m reports.catalog --markdown     # docs/metrics.md
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from quality import emodel


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
    plot: str = ""             # its panel's title in a run's report, where it is plotted
    short: str = ""            # its title where columns are narrow (comparisons), no unit
    section: str = ""          # the report's section whose table shows it beside its kin: "audio"

    @property
    def tracked(self) -> bool:
        return self.better != 0

    @property
    def brief(self) -> str:
        """Its short title with its unit: "Received (Mbps)"."""
        short = self.short or self.column
        return short if self.unit in UNITLESS or f"({self.unit})" in short else f"{short} ({self.unit})"


@dataclass(frozen=True)
class Label:
    name: str
    column: str
    help: str = ""

    @property
    def brief(self) -> str:
        return self.column


@dataclass(frozen=True)
class Field:
    name: str                  # the sample's field (docs/contracts.md's sample schema)
    prometheus: str            # its series name
    kind: str                  # counter | gauge
    help: str


MBPS = 1e-6
UNITLESS = ("score", "flag", "participants", "")
# of a spread figure's observations at target, beside its mean: `<name>_<p>` in the headline
PERCENTILES = ("p50", "p90", "p95", "p99", "max")

FIGURES = (
    Figure("participants", "Participants", "participants", digits=0, better=1, help="participants started"),
    Figure("send_bps", "Send video (Mbps)", "Mbps", MBPS, 3, better=1, at_target=True, floor=20_000, short="Sent",
           plot="Sent, per stream",
           trend="Sent bitrate at target", source="streams", spread=True, help="video bitrate each sender sent, per stream"),
    Figure("recv_bps", "Recv video per stream (Mbps)", "Mbps", MBPS, 3, better=1, at_target=True, floor=20_000,
           short="Received", plot="Received, per stream", trend="Received bitrate at target", source="streams", spread=True,
           help="video bitrate received, per stream"),
    Figure("recv_total_bps", "Recv video per participant (Mbps)", "Mbps", MBPS, 3, better=1, at_target=True,
           floor=100_000, source="streams", spread=True, help="video bitrate each participant received, all its streams"),
    Figure("rtt_send_ms", "Sender RTT (ms)", "ms", digits=1, better=-1, at_target=True, floor=1, short="Sender RTT",
           trend="Sender RTT at target", source="streams", spread=True, help="round-trip time from remote-inbound-rtp of sent video"),
    Figure("rtt_recv_ms", "Receiver RTT (ms)", "ms", digits=1, better=-1, at_target=True, floor=1, short="Receiver RTT",
           source="streams", spread=True, help="round-trip time of the receivers' candidate pairs"),
    Figure("fps", "Recv fps", "fps", digits=1, better=1, at_target=True, floor=1, short="Frame rate",
           plot="Frame rate received", source="streams", spread=True, help="frames per second of received video (getStats)"),
    Figure("loss_pct", "Recv loss (%)", "%", digits=2, better=-1, at_target=True, floor=0.1, short="Loss",
           plot="Packet loss received", source="streams", help="received video packets lost"),
    Figure("jitter_ms", "Recv jitter (ms)", "ms", digits=1, better=-1, at_target=True, floor=1, short="Jitter",
           plot="Jitter received", source="streams", spread=True, help="interarrival jitter of received video"),
    Figure("nacks_per_s", "NACKs / stream-s", "per stream-second", digits=2, better=-1, at_target=True,
           floor=0.1, source="streams", spread=True, help="NACKs the receivers sent per received video stream and second: "
           "how much the SFU's forwarding had to be repaired"),
    Figure("freezes_per_min", "Freezes / stream-min", "per stream-minute", digits=2, better=-1, at_target=True,
           floor=0.1, short="Freezes", plot="Freezes (getStats)", trend="Freezes at target", source="streams",
           help="received video freezes (getStats freezeCount)"),
    Figure("brisque", "BRISQUE", "score", digits=1, better=-1, at_target=True, floor=1, plot="BRISQUE (lower is better)",
           trend="BRISQUE at target (lower is better)", source="quality", help="no-reference quality of received frames"),
    Figure("vmaf", "VMAF", "score", digits=1, better=1, at_target=True, floor=1, trend="VMAF at target",
           plot="VMAF (higher is better)", source="quality",
           help="full-reference quality of received frames against the source frame their code names"),
    Figure("psnr", "PSNR (dB)", "dB", digits=1, better=1, at_target=True, floor=0.5, short="PSNR",
           plot="PSNR (higher is better)", source="quality", help="full-reference PSNR of received frames"),
    Figure("delay_ms", "Delay median (ms)", "ms", digits=0, better=-1, at_target=True, floor=5, short="Delay",
           plot="Glass-to-glass delay", trend="Delay at target (median)", source="playback",
           help="glass-to-glass delay, from the sender's camera to the receiver"),
    Figure("audio_mos", "Audio MOS (E-model)", "score", digits=2, better=1, at_target=True, floor=0.05,
           short="Audio MOS", plot="Audio MOS (E-model, G.107)", trend="Audio MOS at target (E-model)", source="audio",
           spread=True, section="audio",
           help="ITU-T G.107's E-model MOS of each received audio stream (quality/emodel.py): its delay "
           "`audio_delay_ms`, its loss the packets lost or too late to be played, Opus taken as Ie 0 and Bpl 15.95"),
    Figure("audio_concealed_pct", "Audio concealed (%)", "%", digits=2, better=-1, at_target=True, floor=0.1,
           short="Concealed", plot="Audio concealed", source="audio", section="audio",
           help="received audio samples the jitter buffer synthesised for lost or late packets, of all it "
           "played out (getStats concealedSamples / totalSamplesReceived; a synthetic receiver's model estimates them)"),
    Figure("audio_delay_ms", "Audio delay, E-model (ms)", "ms", digits=0, better=-1, at_target=True, floor=5,
           short="Audio delay", plot="Audio delay (E-model)", source="audio", spread=True, section="audio",
           help="the E-model's mouth-to-ear delay of each received audio stream: the network's one way from "
           "sender to SFU to receiver (half each one's round trip to the SFU) plus the receiver's jitter "
           "buffer's mean delay (no capture, encoding or playout device in it)"),
    Figure("audio_visqol", "ViSQOL (MOS-LQO)", "score", digits=2, better=1, at_target=True, floor=0.05,
           short="ViSQOL", plot="ViSQOL of received speech", trend="ViSQOL at target", source="speech",
           section="audio", help="ViSQOL v3 in speech mode (visqol-python) of what each browser heard of each "
           "stream, recorded in the window and set against the microphone's speech its audio codes place it in"),
    Figure("audio_pesq", "PESQ (wideband)", "score", digits=2, better=1, at_target=True, floor=0.05,
           short="PESQ", source="speech", section="audio",
           help="PESQ wideband (ITU-T P.862.2) of the same recordings, beside ViSQOL"),
    Figure("audio_mouth_to_ear_ms", "Mouth-to-ear delay (ms)", "ms", digits=0, better=-1, at_target=True,
           floor=5, short="Mouth to ear", plot="Mouth-to-ear delay", source="speech", section="audio",
           help="from the sender's microphone playing an audio code to a receiving browser's recording "
           "of it (median of a window's codes, then of the streams)"),
    Figure("check_pass_rate", "Checks passed (%)", "%", 100, 1, better=1, at_target=True, floor=0.02,
           short="Checks passed", plot="Video checks passed", trend="Video checks passed", help="share of the video checks that found the video playing"),
    Figure("sfu_cpu", "SFU CPU (cores)", "cores", digits=3, plot="SFU CPU", help="the SFU's CPU"),
    Figure("sfu_rss", "SFU RSS (MB)", "MB", MBPS, 0, plot="SFU memory (RSS)", help="the SFU's resident memory"),
    Figure("clients_cpu_per_participant", "Browser CPU / participant (cores)", "cores", digits=3,
           plot="Browser CPU per\nparticipant", help="the clients' CPU per participant"),
    Figure("fwd_pps", "Forwarded packets/s", "packets/s", digits=0, help="packets the receivers got"),
    Figure("sfu_us_per_packet", "SFU CPU per packet (µs)", "µs", digits=2, short="µs per forwarded packet",
           help="the SFU's CPU per forwarded packet"),
    Figure("sfu_mhz_per_stream", "SFU MHz per forwarded stream", "MHz", digits=2, short="MHz per forwarded stream",
           plot="SFU per forwarded\nstream", help="the SFU's CPU, in MHz of its machine's clock, per forwarded stream"),
    # per run only: the results database and the trend
    Figure("coped", "Load coped with", "participants", digits=0, series=False, better=1,
           trend="Load coped with (last count before the knee)",
           help="the last participant count measured before the knee (or the most reached)"),
    Figure("knee", "Knee", "participants", digits=0, series=False, better=1, help="the knee's participant count"),
    Figure("audio_knee", "Audio knee", "participants", digits=0, series=False, better=1,
           help="the audio knee's participant count (reports/audio.py's rule)"),
    Figure("server_cpu_per_participant", "SFU CPU / participant", "% of one core", 100, 3, series=False, better=-1,
           at_target=True, floor=0.0005, trend="SFU CPU per participant", help="the SFU's CPU per participant at target"),
    Figure("client_cpu_per_participant", "Client CPU / participant", "% of one core", 100, 3, series=False,
           better=-1, at_target=True, floor=0.01, help="the clients' CPU per participant at target"),
    Figure("client_bound", "Client-bound", "flag", digits=0, series=False, better=-1,
           help="1 when the clients, not the SFU, limited the run"),
)

# Measured at each step and shown in tables and plots of their own: no headline keeps them, no
# threshold or export names them.
def _step(*args, **kw) -> Figure:
    return Figure(*args, series=False, **kw)


STEP_FIGURES = (
    _step("frozen_share", "Frozen frames (scored)", "% of scored frames", 100, 1,
          help="share of the captured received frames scored as frozen"),
    _step("code_fps", "Frames delivered (frame code)", "fps", digits=1,
          help="frames per second each received video delivered, read off the frame codes"),
    _step("skipped_per_s", "Source frames skipped", "per second", digits=1,
          help="source frames a received video never showed, per second"),
    _step("code_freezes_per_min", "Freezes (frame code)", "per stream-minute", digits=2,
          help="freezes seen in the frame codes (a code held 0.5 s or more)"),
    _step("first_video_p50_s", "First video, median", "s", digits=2, short="First video p50",
          help="of the videos new at a step (a newcomer's, or to a newcomer), the median time from the step's "
               "joins until each was verified playing"),
    _step("first_video_p95_s", "First video, 95th percentile", "s", digits=2, short="First video p95",
          help="as the median, its 95th percentile"),
    _step("first_video_max_s", "First video, slowest", "s", digits=2, short="First video max",
          help="as the median, the slowest of them"),
    _step("storm", "Storm", "participants", digits=0, section="storm",
          help="participants of a join storm, all joining at once on the rooms already running"),
    _step("joins_failed", "Joins failed", "joins", digits=0, section="storm",
          help="a storm's joins whose participant failed or did not play every video within --storm-timeout"),
    _step("first_frame_p50_s", "First frame, median (s)", "s", digits=2, section="storm", short="First frame p50",
          help="of a storm's newcomers, the median time from the later of the two joins to the receiver's "
               "first frame of each video it receives"),
    _step("first_frame_p95_s", "First frame, p95 (s)", "s", digits=2, section="storm", short="First frame p95",
          help="as the median, its 95th percentile: the storm knee's figure"),
    _step("first_frame_p99_s", "First frame, p99 (s)", "s", digits=2, section="storm", short="First frame p99",
          help="as the median, its 99th percentile"),
    _step("first_frame_max_s", "First frame, slowest (s)", "s", digits=2, section="storm", short="First frame max",
          help="as the median, the slowest"),
    _step("storm_sfu_cores", "SFU CPU in the storm (cores)", "cores", digits=3, section="storm",
          help="the SFU's CPU over the storm's window"),
    _step("storm_background_freezes_per_min", "Background freezes / stream-min", "per stream-minute", digits=2,
          section="storm", help="freezes of the rooms already running, in the storm's window"),
    _step("storm_background_loss_pct", "Background loss (%)", "%", digits=2, section="storm",
          help="video packet loss of the rooms already running, in the storm's window"),
    _step("restarted_participants", "Participants", "participants", digits=0, section="restart",
          help="participants in when the SFU was restarted (or the link cut)"),
    _step("restart_down_s", "Down (s)", "s", digits=2, section="restart",
          help="from the planned restart's stop until the SFU answered its health check again; with --outage "
               "link, how long the link was cut"),
    _step("recovered_10s_pct", "Video back within 10 s (%)", "%", digits=1, section="restart",
          short="Back in 10 s", help="participants with a frame of every video of their room within 10 s of "
                                     "the restart (or of the link's return), of those in before it"),
    _step("recovered_30s_pct", "Video back within 30 s (%)", "%", digits=1, section="restart",
          short="Back in 30 s", help="as within 10 s, within 30 s"),
    _step("recovered_60s_pct", "Video back within 60 s (%)", "%", digits=1, section="restart",
          short="Back in 60 s", help="as within 10 s, within 60 s"),
    _step("recovery_first_s", "First back (s)", "s", digits=2, section="restart",
          help="the restart until the first participant had every video of its room again"),
    _step("recovery_last_s", "Last back (s)", "s", digits=2, section="restart",
          help="the restart until the last participant that got video back had it"),
    _step("not_recovered", "Never back", "participants", digits=0, section="restart",
          help="participants with no frame of some video of their room within --recovery-timeout"),
    _step("rejoins", "Rejoins", "rejoins", digits=0, section="restart",
          help="rejoins after the restart, each a fresh session, as the adapter's official client retries"),
    _step("ice_restarts", "ICE restarts", "restarts", digits=0, section="restart",
          help="ICE restarts the browsers' own clients made after the outage (a new local ICE ufrag once an "
               "offer and answer settled); synthetic participants rejoin instead"),
    _step("sfu_mhz_per_published", "SFU MHz per published stream", "MHz", digits=1,
          short="MHz per published stream", plot="SFU per published\nstream",
          help="the SFU's CPU, in MHz of its machine's clock, per published stream"),
    _step("pub_streams", "Published streams", "streams", digits=0, help="tracks the senders published"),
    _step("fwd_streams", "Forwarded streams", "streams", digits=0,
          help="published tracks delivered to receivers (one per receiver)"),
    _step("viewers", "Viewers", "participants", digits=0, help="participants who only watch (a broadcast's audience)"),
    _step("sfu_cpu_per_viewer", "SFU CPU per viewer", "% of one core", 100, 3,
          help="the SFU's CPU per participant who only watches, at each count"),
    _step("sfu_cpu_per_participant", "SFU CPU per participant", "% of one core", 100, 3,
          help="the SFU's CPU per participant, at each count"),
    _step("sfu_cores_fwd", "SFU CPU (cores)", "cores", digits=3, help="the SFU's CPU over the windows"),
    _step("sfu_in_mbps", "SFU in (Mbps)", "Mbps", digits=2, help="the SFU's interface, in"),
    _step("sfu_out_mbps", "SFU out (Mbps)", "Mbps", digits=2, help="the SFU's interface, out"),
    _step("sfu_udp_drops", "SFU socket drops / s", "per second", digits=1,
          help="datagrams the SFU's sockets dropped for full receive buffers"),
    _step("sfu_throttled", "SFU throttled (% of periods)", "%", 100, 1,
          help="the CFS periods in which the SFU's CPU budget ran out"),
    _step("clients_throttled", "Clients throttled (% of periods)", "%", 100, 1,
          help="the CFS periods in which the clients' CPU quota ran out"),
    _step("sfu_media_in_mbps", "Media in (Mbps)", "Mbps", digits=2, help="the SFU's UDP in"),
    _step("sfu_media_out_mbps", "Media out (Mbps)", "Mbps", digits=2, help="the SFU's UDP out"),
    _step("sfu_media_in_ratio", "Media in / clients sent", "ratio", digits=2,
          help="the SFU's media in against the payload the clients' getStats sent"),
    _step("sfu_media_out_ratio", "Media out / clients received", "ratio", digits=2,
          help="the SFU's media out against the payload the clients' getStats received"),
    _step("sfu_signalling_kbps", "Signalling (kbit/s)", "kbit/s", digits=1, help="the SFU's TCP"),
    _step("sfu_signalling_kbps_per_participant", "Signalling per participant (kbit/s)", "kbit/s", digits=2,
          help="the SFU's TCP per participant"),
    _step("delay_from_browsers_ms", "Delay from browsers (ms)", "ms", digits=0,
          help="glass-to-glass delay of videos browsers sent"),
    _step("delay_from_synthetic_ms", "Delay from synthetic (ms)", "ms", digits=0,
          help="delay of videos synthetic participants sent: no capture or encoding in it"),
    _step("audio_streams", "Audio streams", "streams", digits=0, section="audio",
          help="received audio streams observed over the windows at a count"),
    _step("audio_jb_ms", "Jitter buffer (ms)", "ms", digits=0, section="audio",
          help="the mean time a received audio sample spent in the jitter buffer (getStats jitterBufferDelay "
          "/ jitterBufferEmittedCount)"),
    _step("audio_jb_held_ms", "Held for lip sync (ms)", "ms", digits=0, section="audio",
          help="the least delay a received audio stream's jitter buffer was set to keep, mean: a browser sets "
          "it to play the audio in sync with its sender's video (getStats jitterBufferMinimumDelay "
          "/ jitterBufferEmittedCount; none from a synthetic receiver)"),
    _step("audio_jitter_ms", "Audio jitter (ms)", "ms", digits=1, section="audio",
          help="interarrival jitter of received audio"),
    _step("audio_loss_pct", "Audio lost or late (%)", "%", digits=2, section="audio",
          help="received audio packets lost, or discarded for coming too late to be played"),
    _step("audio_concealments_per_min", "Concealment events / stream-min", "per stream-minute", digits=2,
          section="audio", help="times a received audio stream's jitter buffer started concealing"),
    _step("audio_silent_pct", "Concealed as silence (%)", "%", digits=2, section="audio",
          help="received audio samples concealed with silence, of all played out"),
    _step("audio_accelerated_pct", "Sped up (% of samples)", "%", digits=2, section="audio",
          help="received audio samples removed to play faster, the jitter buffer draining"),
    _step("audio_decelerated_pct", "Slowed down (% of samples)", "%", digits=2, section="audio",
          help="received audio samples inserted to play slower, the jitter buffer filling"),
    _step("link_loss_pct", "Link loss (%)", "%", digits=1, help="what the emulated link dropped"),
    _step("recovery_s", "Playing again after (s)", "s", digits=1,
          help="once a network profile was lifted, until every video the browsers show had a new frame"),
    _step("layer_bps", "Bitrate per stream (Mbps)", "Mbps", MBPS, 3, help="a layer's bitrate per stream"),
    _step("layer_fps", "Frame rate", "fps", digits=1, help="a layer's frame rate"),
    _step("keyframe_requests_per_min", "Keyframe requests / stream-min", "per stream-minute", digits=2,
          help="keyframe requests a layer got, or a received stream sent"),
    _step("vmaf_scaled", "VMAF (scaled to the source)", "score", digits=1,
          help="VMAF of a layer's frames scaled to the source, as a viewer's tile shows it"),
    _step("vmaf_own", "VMAF at the layer's size", "score", digits=1,
          help="VMAF of a layer's frames against the source scaled down alike"),
    _step("height_px", "Height (px)", "px", digits=0, help="a layer's picture height"),
)

LABELS = (
    Label("rank", "Rank", "1 + the SFUs ahead beyond the noise; level ones share a rank (=)"),
    Label("sfu", "SFU"),
    Label("run", "Run", "a run folder's name"),
    Label("repeat", "Repeat", "which of its SFU's repeats a run is"),
    Label("clients", "Clients", "the kind of client: browser, synthetic, or all"),
    Label("runs", "Runs", "runs counted (of those asked for)"),
    Label("reached", "Reached", "the most participants reached"),
    Label("knees", "Knees", "each run's knee"),
    Label("knee_per_run", "Knee per run"),
    Label("knee_span", "Knee (median, range)"),
    Label("criterion", "Criterion", "what made the knee"),
    Label("audio_criterion", "Audio criterion", "what made the audio knee"),
    Label("note", "Note"),
    Label("field", "Field"),
    Label("metric", "Metric"),
    Label("unit", "Unit"),
    Label("n", "n", "values"),
    Label("min_positive", "Min (of > 0)"),
    Label("max", "Max"),
    Label("avg", "Avg"),
    Label("mean", "Mean"),
    Label("threshold", "Threshold"),
    Label("share_above_pct", "Share above (%)"),
    Label("figure", "Figure"),
    *(Label(f"percentile_{p}", p, "of a figure's observations") for p in PERCENTILES),
    Label("value", "Value"),
    Label("median_previous", "Median of previous"),
    Label("noise_band", "Noise band"),
    Label("started_utc", "Started (UTC)"),
    Label("sfu_version", "SFU version"),
    Label("sfu_profile", "Profile", "the adapter's profile its runs used"),
    Label("participants_per_vcpu", "Participants per vCPU", "the knee over the SFU's budget in cores"),
    Label("usd_per_participant_hours", "USD per 1,000 participant-hours", "on-demand, at the knee"),
    Label("git_sha", "git sha"),
    Label("status", "Status"),
    Label("scenario", "Scenario"),
    Label("receiver", "Receiver", "the kind of client, or the participant, that received"),
    Label("sender", "Sender"),
    Label("video_streams", "Video streams"),
    Label("streams", "Streams"),
    Label("stream_share_pct", "Share of streams (%)"),
    Label("direction", "Direction"),
    Label("codec", "Codec"),
    Label("network", "Network", "the profile the window was under"),
    Label("window", "Window", "a window's phase or id"),
    Label("phase", "Phase"),
    Label("length_s", "Length (s)", "how long the window took"),
    Label("headroom", "Clients had headroom"),
    Label("why", "Why"),
    Label("room", "Room"),
    Label("checks", "Checks"),
    Label("passed", "Passed"),
    Label("pass_rate_pct", "Pass rate (%)"),
    Label("verdicts", "Verdicts"),
    Label("new_videos", "New videos", "videos a step's joins added (a newcomer's own camera, what it receives, "
          "and its video at the others)"),
    Label("not_playing", "Not playing", "of those, the ones not verified playing within --video-timeout"),
    Label("layer", "Layer"),
    Label("frames", "Frames"),
    Label("heights_received", "Heights received (px, in order)"),
    Label("layer_switches", "Layer switches"),
    Label("first_layer", "First layer"),
    Label("last_layer", "Last layer"),
    Label("keyframe_requests_sent", "Keyframe requests sent"),
    Label("keyframe_requests_near_switch", "…", "keyframe requests sent near a switch (reports/layers.py)"),
    Label("freezes_near_switch", "Freezes", "freezes near a switch (reports/layers.py)"),
    Label("run_value", "", "a run's or SFU's value, the column titled by its name"),
    Label("network_changed_to", "Network changed to"),
    Label("received_streams", "Received streams"),
    Label("switched", "Switched"),
    Label("median_first_switch_s", "Median first switch (s)"),
    Label("slowest_first_switch_s", "Slowest first switch (s)"),
    Label("layers_at_end", "Layers at the step's end"),
    Label("slowest_to_last_layer_s", "Slowest to its last layer (s)"),
    Label("kept_layer", "Kept their layer"),
    # the 2018 study's published figures (reports/cosmo-2018.toml)
    Label("label_2018", "SFU (2018 version)"),
    Label("participants_2018", "Participants at target"),
    Label("checks_pct_2018", "Checks passed (%)"),
    Label("ramp_sent_mbps_2018", "Ramp-up sent (Mbps, avg)"),
    Label("ramp_rtt_ms_2018", "Ramp-up sender RTT (ms, avg)"),
    Label("ramp_rtt_over_50_pct_2018", "Ramp-up RTT > 50 ms (%)"),
    Label("ramp_received_mbps_2018", "Ramp-up received (Mbps, avg)"),
    Label("target_sent_mbps_2018", "Target sent (Mbps, avg)"),
    Label("target_rtt_ms_2018", "Target sender RTT (ms, avg)"),
    Label("target_received_mbps_2018", "Target received (Mbps, avg)"),
    Label("knee_2018", "Knee (participants)"),
)

ENTRIES = {e.name: e for e in (*FIGURES, *STEP_FIGURES, *LABELS)}


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


def title(name: str, brief: bool = False) -> str:
    """A column's title: the entry's own, or its short one with its unit (KeyError: undeclared)."""
    entry = ENTRIES[name]
    return entry.brief if brief else entry.column


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
    lines += ["", "## Figures of each step", "",
              "Measured at each step and shown in the report's tables of their own (the SFU's cost and "
              "traffic, the receivers by kind, the layers) and in its plots; no headline keeps them.", "",
              "| name | column | unit | meaning |", "|---|---|---|---|"]
    for f in STEP_FIGURES:
        lines.append(f"| `{f.name}` | {f.column} | {f.unit} | {f.help} |")
    lines += ["", "## The E-model's inputs (`audio_mos`)", "",
              "ITU-T G.107 (06/2015), written from its equations in `quality/emodel.py`: the delay is the "
              "stream's `audio_delay_ms` (the echo-free absolute delay Ta, the echo path's delay T, and twice "
              "it the echo's round trip Tr), the loss its packets lost or too late to be played (random loss). "
              + emodel.OPUS_SOURCE]
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
