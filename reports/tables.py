"""The report's tables: the 2018 study's Tables IV-VI, the measurements by participant count, the
rooms' checks, the windows' health, the SFU's cost and traffic, the receivers by kind, the video codecs
and the network profiles."""
from __future__ import annotations

from collections import defaultdict

from . import catalog
from .series import room_participants
from .audio import audio_stats, speech_stats
from .stats import describe, percentile, playback_stats, stream_stats
from .table import Column, Table, rounded, scaled
from .windows import MEASURED, probe_edges


KINDS = ("browser", "synthetic")


def kind_table(obs: list[dict], playback: list[dict], checks: list[dict], events: list[dict]) -> Table:
    """The receivers' figures per participant count and kind of client (browser or synthetic), so
    that neither kind's numbers pass for the other's."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for o in obs:
        if o["phase"] in MEASURED and o["direction"] == "recv" and o["participants"] is not None:
            groups[(o["participants"], o["client"])].append(o)
    delays: dict[tuple, list[dict]] = defaultdict(list)
    for r in playback:
        if r.get("participants") is not None:
            delays[(r["participants"], r.get("client") or "browser", r.get("peer_client") or "browser")].append(r)
    rooms = room_participants(events)
    passed: dict[tuple, list[bool]] = defaultdict(list)
    for c in checks:
        p = c.get("participants") or rooms.get(c.get("room"))
        if p is not None:
            passed[(p, c.get("client") or "browser")].append(bool(c.get("ok")))
    rows = []
    for key in sorted(set(groups) | set(passed)):
        st, ok = stream_stats(groups.get(key, [])), passed.get(key, [])
        delay = [playback_stats(delays.get((*key, sender), [])).get("delay_ms") for sender in KINDS]
        rows.append([key[0], key[1], len(groups.get(key, [])), rounded(scaled(st.get("recv_bps"), 1e-6), 3),
                     rounded(st.get("fps"), 1), rounded(st.get("jitter_ms"), 1), rounded(st.get("loss_pct"), 2),
                     rounded(st.get("freezes_per_min"), 2), *(rounded(d, 0) for d in delay),
                     rounded(100 * sum(ok) / len(ok), 1) if ok else None])
    return Table("clients", "Receivers by kind: browsers and synthetic participants",
                 ["participants", "receiver", "video_streams", "recv_bps", "fps", Column("jitter_ms", brief=True),
                  Column("loss_pct", brief=True), "freezes_per_min", "delay_from_browsers_ms",
                  "delay_from_synthetic_ms", "check_pass_rate"],
                 rows, note="Synthetic participants (synth/) publish a pre-encoded clip at a fixed bitrate "
                 "(no encoder, no congestion control) and do not decode: they count a frame when all its "
                 "packets arrived, recognise the clip's frames by their bytes (delay, checks) and tell a "
                 "browser's frames apart by a fingerprint of theirs (checks only). Delay from a synthetic "
                 "sender has no capture or encoding in it.")


def codec_table(obs: list[dict]) -> Table:
    """The codec of the browsers' video streams in the measured windows, sent and received: the run
    asked for one (--codec), and an SFU that forwarded another would change what is compared."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for o in obs:
        if o["phase"] in MEASURED and o["kind"] == "video" and o["client"] == "browser":
            counts[(o["direction"], o.get("codec") or "not recorded")] += 1
    totals: dict[str, int] = defaultdict(int)
    for (direction, _), n in counts.items():
        totals[direction] += n
    rows = [[direction, codec, n, rounded(100 * n / totals[direction], 1)]
            for (direction, codec), n in sorted(counts.items(), key=lambda kv: (kv[0][0] != "send", kv[0][1]))]
    return Table("codecs", "Video codecs (browsers)", ["direction", "codec", "streams", "stream_share_pct"],
                 rows, note="One stream per measured window, its codec as getStats names it (the codec "
                 "statistics its RTP stream points to). Runs from before this was recorded say so.")


def network_table(a) -> Table:
    """The same participants under each network profile the degrade shape stepped through (its
    `network` windows), beside the target window under the run's own network, each with whether its
    clients had headroom, the link's own loss over the window (the emulator's counters in the SFU's
    probe rows), once the profile was lifted how long the slowest video took to play again
    (`network_recovered`), and what its participants heard. `a`: the run's metrics.Analysis."""
    net = a.run.meta.get("network") if isinstance(a.run.meta.get("network"), dict) else {}
    base, events = str(net.get("name") or "plain"), a.run.events
    headroom = {h["window"]: "no: " + "; ".join(h["reasons"]) if h["client_bound"] else "yes" for h in a.health}
    windows: dict = {}
    for o in a.obs:
        if o["phase"] in ("network", "target") and o["kind"] == "video":
            windows.setdefault(o["window"], []).append(o)
    if not any(group[0]["phase"] == "network" for group in windows.values()):
        return Table("network", "Under each network profile", [], [])
    heard: dict = {}
    for o in a.audio:
        heard.setdefault(o["window"], []).append(o)
    changes = sorted((e["t"], e.get("network")) for e in events if e.get("event") == "network_changed" and e.get("t"))
    recovered = {e.get("network"): e for e in events if e.get("event") == "network_recovered"}
    link = _link_loss(a.run.server)
    rows = []
    for window, group in sorted(windows.items(), key=lambda kv: min(o["t"] or 0 for o in kv[1])):
        t = min(o["t"] or 0 for o in group)
        name = base
        for changed, profile in changes:
            if changed <= t:
                name = profile
        st = stream_stats(group)
        pb = playback_stats([r for r in a.run.playback if r.get("window") == window])
        au = {**audio_stats(heard.get(window, [])),
              **speech_stats([r for r in a.run.speech if r.get("window") == window])}
        rows.append([name, group[0]["phase"], group[0]["participants"], rounded(scaled(st.get("recv_bps"), 1e-6), 3),
                     rounded(st.get("fps"), 1), rounded(st.get("rtt_send_ms"), 1), rounded(st.get("loss_pct"), 2),
                     rounded(st.get("jitter_ms"), 1), rounded(st.get("freezes_per_min"), 2), rounded(pb.get("delay_ms"), 0),
                     *(rounded(au.get(k), d) for k, d in (("audio_mos", 2), ("audio_visqol", 2),
                                                          ("audio_concealed_pct", 2), ("audio_delay_ms", 0))),
                     rounded(link.get(window), 1), _recovery(recovered.get(name)) if group[0]["phase"] == "network" else "",
                     headroom.get(window, "not judged")])
    return Table("network", "Under each network profile: the same participants",
                 ["network", "window", "participants", "recv_bps", "fps", "rtt_send_ms", Column("loss_pct", brief=True),
                  Column("jitter_ms", brief=True), "freezes_per_min", Column("delay_ms", brief=True),
                  Column("audio_mos", brief=True), Column("audio_visqol", brief=True),
                  Column("audio_concealed_pct", brief=True),
                  Column("audio_delay_ms", brief=True), "link_loss_pct", "recovery_s", "headroom"], rows,
                 note="The degrade shape measures the same load under each profile after a settling time; "
                      "the target window is under the run's own network. Loss is what the receivers "
                      "counted (a packet never followed by another is never counted: a cut link shows "
                      "as no bitrate); link loss, what the emulated link dropped over the window. Playing "
                      "again: once the profile was lifted, until every video the browsers show had a "
                      "new frame (the slowest). Audio: reports/audio.py's figures of the window.")


def _link_loss(server: list[dict]) -> dict[int, float]:
    """Per window: the share of packets the emulated link dropped between its edges (%)."""
    out = {}
    for window, roles in probe_edges(server).items():
        e = roles.get("sfu", {})
        if "link_packets" in e.get("start", {}) and "link_packets" in e.get("end", {}):
            packets = e["end"]["link_packets"] - e["start"]["link_packets"]
            if packets > 0:
                out[window] = 100 * (e["end"]["link_lost"] - e["start"]["link_lost"]) / packets
    return out


def _recovery(event: dict | None) -> str:
    if event is None:
        return "not measured"
    if event.get("seconds") is None:
        return f"{event.get('recovered')}/{event.get('videos')} videos within {event.get('within')} s"
    return f"{event['seconds']:.1f}"


def cost_table(cost: list[dict]) -> Table:
    rows = [[r["participants"], r.get("pub_streams"), r["fwd_streams"], rounded(r["fwd_pps"], 0),
             rounded(r["sfu_cores_fwd"], 3), rounded(r["sfu_us_per_packet"], 2), rounded(r.get("sfu_mhz_per_published"), 1),
             rounded(r.get("sfu_mhz_per_stream"), 2), rounded(r.get("sfu_in_mbps"), 2), rounded(r.get("sfu_out_mbps"), 2),
             rounded(r.get("sfu_udp_drops"), 1), rounded(scaled(r.get("sfu_throttled"), 100), 1)] for r in cost]
    return Table("cost", "What the SFU spent per forwarded stream and packet, at each step",
                 ["participants", "pub_streams", "fwd_streams", "fwd_pps", "sfu_cores_fwd", "sfu_us_per_packet",
                  "sfu_mhz_per_published", "sfu_mhz_per_stream", "sfu_in_mbps", "sfu_out_mbps", "sfu_udp_drops",
                  "sfu_throttled"], rows,
                 note="Over the ramp-up and target windows at each count; a forwarded stream is one "
                      "published track (audio or video) delivered to one receiver, browser or synthetic. "
                      "Throttled: the share of CFS periods in which the SFU's CPU budget ran out.")


def viewers_table(series: list[dict]) -> Table:
    """A broadcast's audience at each count: its viewers and what each cost the SFU."""
    rows = [[r["participants"], r["viewers"], rounded(scaled(r.get("sfu_cpu_per_viewer"), 100), 3)]
            for r in series if r.get("viewers")]
    return Table("viewers", "The audience: viewers and the SFU's CPU per viewer, at each count",
                 ["participants", "viewers", "sfu_cpu_per_viewer"], rows,
                 note="Viewers: participants who only watch. The SFU's CPU over every probe interval at the count, "
                      "over its viewers.")


def traffic_table(cost: list[dict]) -> Table:
    """The SFU's media and signalling apart, and its media against what the clients sent and got."""
    rows = [[r["participants"], rounded(r["sfu_media_in_mbps"], 2), rounded(r["sfu_media_out_mbps"], 2),
             rounded(r.get("sfu_media_in_ratio"), 2), rounded(r.get("sfu_media_out_ratio"), 2),
             rounded(r["sfu_signalling_kbps"], 1), rounded(r.get("sfu_signalling_kbps_per_participant"), 2)]
            for r in cost if r.get("sfu_media_in_mbps") is not None]
    return Table("traffic", "The SFU's traffic: media and signalling apart",
                 ["participants", "sfu_media_in_mbps", "sfu_media_out_mbps", "sfu_media_in_ratio",
                  "sfu_media_out_ratio", "sfu_signalling_kbps", "sfu_signalling_kbps_per_participant"],
                 rows, note="Counted by protocol in the SFU's network namespace (nftables): media is UDP (RTP, "
                 "RTCP, ICE, DTLS), signalling TCP (WebSocket and HTTP, the engine's health checks too). The "
                 "ratios set the SFU's media, headers included, against the payload the clients' getStats "
                 "say they sent and received: above about 1.5 something sends far more than the media.")


BITRATE_THRESHOLD_BPS = 1e6   # the study's "share above 1 Mbps"


RTT_THRESHOLD_MS = 50.0       # the study's "share above 50 ms"


STUDY_COLUMNS = ["metric", "unit", "n", "min_positive", "max", "avg", "threshold", "share_above_pct"]


def _study_row(label: str, unit: str, values: list[float], scale: float, digits: int,
               threshold: float | None = None) -> list:
    d = describe([v * scale for v in values if v is not None],
                 threshold * scale if threshold is not None else None)
    thr = f"> {threshold * scale:g} {unit}" if threshold is not None else None
    return [label, unit, d["n"], rounded(d["min"], digits), rounded(d["max"], digits), rounded(d["avg"], digits),
            thr, rounded(d["above"] * 100, 1) if d["above"] is not None else None]


SENDER_KEYS = ["send_bps", "rtt_send_ms"]


RECEIVER_KEYS = ["recv_bps", "rtt_recv_ms", "fps", "jitter_ms", "loss_pct"]


def _sender_rows(obs: list[dict]) -> list[list]:
    send = [o for o in obs if o["kind"] == "video" and o["direction"] == "send"]
    return [
        _study_row("Video bitrate sent, per stream", "Mbps", [o["bps"] for o in send], 1e-6, 3,
                   BITRATE_THRESHOLD_BPS),
        _study_row("RTT, sender (remote-inbound-rtp)", "ms", [r for o in send for r in o["rtt"]], 1, 1,
                   RTT_THRESHOLD_MS),
    ]


def _receiver_rows(obs: list[dict]) -> list[list]:
    recv = [o for o in obs if o["kind"] == "video" and o["direction"] == "recv"]
    return [
        _study_row("Video bitrate received, per stream", "Mbps", [o["bps"] for o in recv], 1e-6, 3,
                   BITRATE_THRESHOLD_BPS),
        _study_row("RTT, receiver (candidate pair)", "ms", [r for o in recv for r in o["rtt"]], 1, 1,
                   RTT_THRESHOLD_MS),
        _study_row("Frame rate received", "fps", [o["fps"] for o in recv], 1, 1),
        _study_row("Jitter received", "ms", [o["jitter_ms"] for o in recv], 1, 1),
        _study_row("Packet loss received, per window", "%",
                   [o["lost"] / o["expected"] for o in recv if o["expected"]], 100, 2),
    ]


def study_tables(obs: list[dict]) -> list[Table]:
    """Tables IV–VI of the 2018 study: ramp-up sender, ramp-up receiver, target load.

    Bitrates are one value per stream and window; RTTs one per sample, as in the study."""
    ramp = [o for o in obs if o["phase"] == "ramp"]
    target = [o for o in obs if o["phase"] == "target"]
    return [
        Table("table4", "Table IV style — ramp-up, sender", STUDY_COLUMNS, _sender_rows(ramp),
              row_keys=SENDER_KEYS),
        Table("table5", "Table V style — ramp-up, receiver", STUDY_COLUMNS, _receiver_rows(ramp),
              row_keys=RECEIVER_KEYS),
        Table("table6", "Table VI style — target load, sender and receiver", STUDY_COLUMNS,
              _sender_rows(target) + _receiver_rows(target), row_keys=SENDER_KEYS + RECEIVER_KEYS),
    ]


def rooms_table(rooms: list[dict]) -> Table:
    rows = [[r["room"], r["checks"], r["passed"],
             rounded(r["pass_rate"] * 100, 1) if r["pass_rate"] is not None else None,
             ", ".join(f"{v} {k}" for k, v in sorted(r["verdicts"].items(), key=lambda kv: -kv[1]))]
            for r in rooms]
    return Table("checks", "Video checks per room", ["room", "checks", "passed", "pass_rate_pct", "verdicts"],
                 rows)


def first_video_table(checks: list[dict]) -> Table:
    """Per step, how long the videos it added took to play: each (receiver, sender) pair's first
    check, counted at the step it ran at, from the step's joins until the video was verified playing
    (frames decoded and their codes read, polled four times a second). A broadcast's step is its new
    viewers; a join storm's, the storm."""
    seen: set = set()
    steps: dict[int, list[dict]] = defaultdict(list)
    for c in sorted(checks, key=lambda c: c.get("t") or 0):
        pair = (c.get("user"), c.get("peer"))
        if pair not in seen and c.get("participants") is not None:
            seen.add(pair)
            steps[c["participants"]].append(c)
    rows = []
    for p, new in sorted(steps.items()):
        played = [c["elapsed"] for c in new if c.get("ok")]
        rows.append([p, len(new), len(new) - len(played), rounded(percentile(played, 50), 2),
                     rounded(percentile(played, 95), 2), rounded(max(played, default=None), 2)])
    return Table("first_video", "Time to the first video of each step's newcomers",
                 ["participants", "new_videos", "not_playing", "first_video_p50_s", "first_video_p95_s",
                  "first_video_max_s"], rows)


def health_table(health: list[dict]) -> Table:
    def pct(v):
        return None if v is None else round(100 * v, 1)
    rows = [[h["phase"], h["window"], h["participants"], rounded(h.get("duration_s"), 1),
             pct(h.get("sfu_throttled")), pct(h.get("clients_throttled")), "yes" if h["client_bound"] else "no",
             "; ".join(h["reasons"]) or h.get("overruled", "")] for h in health]
    return Table("health", "Each measured window: the SFU's budget and the load generator",
                 ["phase", "window", "participants", "length_s", "sfu_throttled", "clients_throttled",
                  "client_bound", "why"], rows,
                 note="Throttled: the share of the window's CFS periods in which the group's CPU quota ran "
                      "out, so that it waited for the next period (empty without a quota).")


PERCENTILE_FIGURES = [f for f in catalog.series() if f.spread]


def percentiles_table(series: list[dict]) -> Table:
    """Each per-stream figure's percentiles at each participant count, beside its mean: one row per
    count and figure (the catalogue's spread figures and PERCENTILES)."""
    rows = []
    for r in series:
        for f in PERCENTILE_FIGURES:
            if r.get(f.name) is None:
                continue
            rows.append([r["participants"], f.column, *(rounded(r[k] * f.scale, f.digits) if r.get(k) is not None
                                                         else None for k in (f.name, *(f"{f.name}_{p}"
                                                                                        for p in catalog.PERCENTILES)))])
    return Table("percentiles", "Percentiles by participant count: each per-stream figure's observations "
                 "in the ramp-up and target windows", ["participants", "figure", "mean",
                                                        *(f"percentile_{p}" for p in catalog.PERCENTILES)], rows)


def series_table(series: list[dict]) -> Table:
    shown = [f for f in catalog.series() if any(r.get(f.name) is not None for r in series)]
    rows = [[rounded(r[f.name] * f.scale, f.digits) if r.get(f.name) is not None else None for f in shown]
            for r in series]
    return Table("series", "Measurements by participant count (ramp-up and target)", [f.name for f in shown], rows)
