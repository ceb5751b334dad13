"""Simulcast layers: which layer each browser sent and received, per participant count and over time.

The layer an SFU forwards to each receiver is where SFUs differ most once publishers send several
(`--simulcast`). A layer is told by the picture's height in getStats (`frameHeight`) against the
source's: the full picture, half or a quarter of it. Chrome may scale a layer down further when it
lacks CPU or bandwidth; such a picture counts as the layer it is nearest to (on a log scale)."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from . import html, plotting, runfiles
from .stats import stream_stats
from .table import Column, Table, rounded, scaled
from .windows import MEASURED, mean

LAYERS = ("full", "1/2", "1/4")
# where one layer's height ratio ends and the next begins: halfway on a log scale (geometric means)
FULL_ABOVE, HALF_ABOVE = math.sqrt(1 * 0.5), math.sqrt(0.5 * 0.25)


def layers_asked(meta: dict) -> int:
    """The layers the run's browsers published (1 for runs made before --simulcast existed)."""
    value = (meta.get("scenario") or {}).get("simulcast")
    return value if isinstance(value, int) and value > 0 else 1


def layer_of(height, source_height) -> str | None:
    """The layer a picture `height` pixels high is nearest to, for a source `source_height` high."""
    if not isinstance(height, (int, float)) or not isinstance(source_height, (int, float)) \
            or height <= 0 or source_height <= 0:
        return None
    ratio = height / source_height
    return "full" if ratio > FULL_ABOVE else "1/2" if ratio > HALF_ABOVE else "1/4"


# a switch's aftermath: the keyframe requests and freezes of the seconds after it are the switch's
AROUND_S = 5.0


def received(run: runfiles.Run) -> dict[tuple[str, str], list[tuple]]:
    """(receiver, sender) -> [(t in ms, height, keyframe requests sent, freezes)] at every sample of
    a video a browser received (background ones too; the last two as getStats counts them, so far)."""
    out: dict[tuple[str, str], list[tuple]] = {}
    for s in runfiles.iter_video_samples(run):
        h, t = s.get("frameHeight"), s.get("t")
        if s.get("direction") != "recv" or (s.get("client") or "browser") != "browser" or not h or not t:
            continue
        out.setdefault((s.get("user"), s.get("peer")), []).append((t, h, s.get("pliCount"), s.get("freezeCount")))
    return out


def timelines(streams: dict[tuple[str, str], list[tuple]]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(receiver, sender) -> [(t in ms, height)] at each change of the picture height (`received`'s
    samples)."""
    out = {}
    for key, samples in streams.items():
        seen = out[key] = []
        for t, h, *_ in samples:
            if not seen or seen[-1][1] != h:
                seen.append((t, h))
    return out


def _increase(before, after) -> float:
    """What a getStats counter gained between two samples (nothing across a reset or a gap)."""
    ok = all(isinstance(v, (int, float)) for v in (before, after))
    return after - before if ok and after >= before else 0


def aftermath(samples: list[tuple], source_height) -> tuple[float, float, float]:
    """(keyframe requests over the stream's life, those within AROUND_S of a layer switch, freezes
    within AROUND_S of one) for one received stream's `received` samples: an SFU that switches a
    receiver at a keyframe of the new layer leaves it nothing to ask for and no picture to freeze."""
    layers = [layer_of(h, source_height) for _, h, *_ in samples]
    # each switch's span: from the sample before the one showing it to AROUND_S after that one
    spans = [(samples[i - 1][0], samples[i][0] + AROUND_S * 1000) for i in range(1, len(samples))
             if layers[i] != layers[i - 1]]
    total = near = frozen = 0
    for (_, _, pli0, frz0), (t, _, pli1, frz1) in zip(samples, samples[1:]):
        asked = _increase(pli0, pli1)
        total += asked
        if any(start < t <= end for start, end in spans):
            near += asked
            frozen += _increase(frz0, frz1)
    return total, near, frozen


def layer_table(obs: list[dict], source_height) -> Table:
    """Per participant count, direction and layer: the browsers' video streams of the measured
    windows, with their bitrate, frame rate and freezes."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    heights: dict[tuple, set] = defaultdict(set)
    counts: dict[tuple, int] = defaultdict(int)
    for o in obs:
        if o["phase"] not in MEASURED or o["client"] != "browser" or o["participants"] is None:
            continue
        layer = layer_of(o.get("height"), source_height)
        if layer is None:
            continue
        key = (o["participants"], o["direction"], layer)
        groups[key].append(o)
        heights[key].add(int(o["height"]))
        counts[key[:2]] += 1
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], k[1] != "send", LAYERS.index(k[2]))):
        st = stream_stats(groups[key])
        bps = st.get("send_bps" if key[1] == "send" else "recv_bps")
        timed = [o for o in groups[key] if o.get("plis") is not None and o.get("dt")]
        minutes = sum(o["dt"] for o in timed) / 60.0
        rows.append([key[0], key[1], key[2], "/".join(map(str, sorted(heights[key], reverse=True))),
                     len(groups[key]), rounded(100 * len(groups[key]) / counts[key[:2]], 1),
                     rounded(scaled(bps, 1e-6), 3), rounded(st.get("fps"), 1),
                     rounded(st.get("freezes_per_min"), 2) if key[1] == "recv" else None,
                     rounded(sum(o["plis"] for o in timed) / minutes, 2) if minutes else None])
    return Table("layers", "Video by simulcast layer (browsers)",
                 ["participants", "direction", "layer", "height_px", "streams", "stream_share_pct", "layer_bps",
                  "layer_fps", "freezes_per_min", "keyframe_requests_per_min"], rows,
                 note="One stream per window: a sent one per layer each browser published, a received one "
                 "per remote participant, its layer told by its picture height at the window's end. A "
                 "sent layer is a stream of its own in the run's other figures too. Keyframe requests: "
                 "the PLIs a sent layer got (the SFU asking, for a receiver it switched or that lost the "
                 "picture), or those a receiver sent.")


def study_table(runs: dict[str, list], coped) -> Table:
    """The layer each SFU's browsers received, its runs (reports.metrics.Analysis) pooled, in the
    windows of the counts each run coped with (`coped(analysis)`; all of a run's where it coped
    with none: its first count gave way)."""
    rows = []
    for sfu, analyses in runs.items():
        got: dict[str, list[int]] = defaultdict(list)
        for a in analyses:
            source, counts = (a.run.meta.get("media") or {}).get("height"), coped(a)
            for o in a.obs:
                if o["phase"] in MEASURED and o["client"] == "browser" and o["direction"] == "recv" \
                        and (not counts or o["participants"] in counts):
                    layer = layer_of(o.get("height"), source)
                    if layer:
                        got[layer].append(int(o["height"]))
        total = sum(map(len, got.values()))
        for layer in sorted(got, key=LAYERS.index):
            rows.append([sfu, layer, "/".join(map(str, sorted(set(got[layer]), reverse=True))), len(got[layer]),
                         rounded(100 * len(got[layer]) / total, 1)])
    return Table("study-layers", "The layer receivers got while their SFU coped",
                 ["sfu", "layer", "height_px", "streams", "stream_share_pct"], rows,
                 note="The browsers' received video streams of the measured windows at the counts each run "
                 "coped with, one per window, its layer (with SVC its top spatial layer) told by its picture "
                 "height at the window's end; every run of the SFU pooled.")


def quality_table(recs: list[dict], source_height) -> Table:
    """Per participant count and layer: the scores of the received frames the browsers captured
    (quality.jsonl), VMAF both as a viewer's tile shows the picture and at the layer's own size."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        layer = layer_of(r.get("height"), source_height)
        if layer is not None and r.get("participants") is not None:
            groups[(r["participants"], layer)].append(r)
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], LAYERS.index(k[1]))):
        frames = groups[key]
        rows.append([key[0], key[1], "/".join(map(str, sorted({r["height"] for r in frames}, reverse=True))),
                     len(frames), *(rounded(mean(r.get(k) for r in frames), 1)
                                    for k in ("vmaf", "vmaf_layer", "psnr", "brisque"))])
    return Table("layer_quality", "Quality by simulcast layer (captured received frames)",
                 ["participants", "layer", "height_px", "frames", "vmaf_scaled", "vmaf_own", "psnr", "brisque"], rows,
                 note="Each captured frame against the source frame its code names. Scaled to the source, "
                 "a lower layer pays for the detail it lacks, as a viewer's large tile shows it; at the "
                 "layer's size, against the source scaled down alike, it shows how well that layer was "
                 "encoded and carried. PSNR and BRISQUE as in the quality figures (at the source's size).")


def switch_table(streams: dict[tuple[str, str], list[tuple]], source_height) -> Table:
    """Per received stream (`received`'s samples): the heights it went through, its switches of
    layer, its first and last picture's layer, and the keyframe requests and freezes around its
    switches."""
    rows = []
    for (receiver, sender), seen in sorted(timelines(streams).items()):
        layers = [layer_of(h, source_height) for _, h in seen]
        switches = sum(1 for a, b in zip(layers, layers[1:]) if a != b)
        asked, near, frozen = aftermath(streams[(receiver, sender)], source_height)
        rows.append([receiver, sender, " → ".join(f"{h:.0f}" for _, h in seen[:12])
                     + (" …" if len(seen) > 12 else ""), switches, layers[0], layers[-1],
                     round(asked), round(near), round(frozen)])
    around = f" within {AROUND_S:g} s of a switch"
    return Table("layer_switches", "Layer switches per received stream (browsers)",
                 ["receiver", "sender", "heights_received", "layer_switches", "first_layer", "last_layer",
                  "keyframe_requests_sent", Column("keyframe_requests_near_switch", qualifier=around),
                  Column("freezes_near_switch", qualifier=around)], rows,
                 note="From every getStats sample of the run (background ones too), so a switch is placed "
                 "to within a sample interval. A receiver asks for a keyframe (PLI) when it cannot decode "
                 "what it gets: an SFU that switches it at a keyframe of the new layer leaves it none to "
                 "ask for.")


def _layer_at(seen: list[tuple[float, float]], t: float, source_height) -> str | None:
    before = [h for at, h in seen if at <= t]
    return layer_of(before[-1], source_height) if before else None


def network_steps(events: list[dict]) -> list[tuple[float, str, float]]:
    """(from, network, until) in ms for each change of the network in a run's `events` (the degrade
    shape's steps, and the run's own network coming back), the last step until infinity."""
    changes = sorted((e["t"], str(e.get("network"))) for e in events
                     if e.get("event") == "network_changed" and isinstance(e.get("t"), (int, float)))
    return [(t, network, changes[i + 1][0] if i + 1 < len(changes) else float("inf"))
            for i, (t, network) in enumerate(changes)]


def switch_time_table(lines: dict[tuple[str, str], list[tuple[float, float]]], events: list[dict],
                      source_height) -> Table:
    """Per change of the network (`network_steps`): how long the received streams took to leave their
    layer after it, the layers they ended the step on, and how long the slowest took to reach its
    last one."""
    rows = []
    for t, network, until in network_steps(events):
        first, last, ended, kept = [], [], defaultdict(int), 0
        for seen in lines.values():
            was = _layer_at(seen, t, source_height)
            if was is None:
                continue
            moves = [(at, layer_of(h, source_height)) for at, h in seen if t < at < until]
            moves = [(at, layer) for k, (at, layer) in enumerate(moves)
                     if layer != (moves[k - 1][1] if k else was)]
            ended[moves[-1][1] if moves else was] += 1
            if not moves:
                kept += 1
                continue
            first.append((moves[0][0] - t) / 1000.0)
            last.append((moves[-1][0] - t) / 1000.0)
        first.sort()
        rows.append([network, len(first) + kept, len(first), rounded(first[len(first) // 2], 1) if first else None,
                     rounded(first[-1], 1) if first else None,
                     ", ".join(f"{n} {layer}" for layer, n in sorted(ended.items(), key=lambda kv: LAYERS.index(kv[0]))),
                     rounded(max(last), 1) if last else None, kept])
    return Table("layer_switch_times", "Layer switches after each network change (browsers)",
                 ["network_changed_to", "received_streams", "switched", "median_first_switch_s",
                  "slowest_first_switch_s", "layers_at_end", "slowest_to_last_layer_s", "kept_layer"], rows,
                 note="From the change (the run's event) to the first sample showing a stream on another "
                 "layer, and to the last change before the next step: placed to within a sample interval "
                 "(a second in measurement windows, --background-interval between them).")


def plot(lines: dict[tuple[str, str], list[tuple[float, float]]], t0: float, t_end: float,
         source_height, events: list[dict], out: Path) -> str | None:
    """One panel per browser receiver: the height it received from each sender over the run, and
    where the network changed."""
    receivers = sorted({r for r, _ in lines})
    if not receivers:
        return None
    shown = receivers[:8]
    fig, axes = plotting.rows(len(shown), row_height=1.6, title="Simulcast layer received, per receiver")
    for ax, receiver in zip(axes, shown):
        for (r, sender), seen in sorted(lines.items()):
            if r != receiver:
                continue
            x = [(t - t0) / 60000.0 for t, _ in seen] + [(t_end - t0) / 60000.0]
            y = [h for _, h in seen] + [seen[-1][1]]
            ax.step(x, y, where="post", linewidth=1.2, label=f"from {sender}")
        ax.set_yticks([source_height / d for d in (1, 2, 4)], [f"{layer} ({source_height / d:.0f})"
                                                               for d, layer in zip((1, 2, 4), LAYERS)])
        ax.set_ylim(0, source_height * 1.12)
        ax.set_title(f"{receiver} receives" + (f" ({len(receivers) - len(shown)} more receivers not shown)"
                                               if receiver == shown[-1] and len(receivers) > len(shown) else ""),
                     fontsize=9)
        for e in events:
            if e.get("event") == "network_changed" and isinstance(e.get("t"), (int, float)):
                ax.axvline((e["t"] - t0) / 60000.0, color="#9467bd", linestyle="--", linewidth=1)
                ax.annotate(f"network: {e.get('network')}", ((e["t"] - t0) / 60000.0, 0.02),
                            xycoords=("data", "axes fraction"), rotation=90, va="bottom", ha="right",
                            fontsize=7, color="#9467bd")
        ax.legend(loc="lower left", fontsize=7, ncols=6)
    axes[-1].set_xlabel("minutes into the run")
    plotting.save(fig, out / "report-layers.png")
    return "report-layers.png"


def add(a, span: tuple[float, float] | None, shown: dict[str, Table], figs: dict, out: Path) -> None:
    """The layer tables and figure of a simulcast run's analysis `a` (reports.metrics.Analysis) into
    the report's `shown` tables and `figs`."""
    source = (a.run.meta.get("media") or {}).get("height")
    streams = received(a.run)
    lines = timelines(streams)
    shown["layers"] = layer_table(a.obs, source)
    shown["layer_switch_times"] = switch_time_table(lines, a.run.events, source)
    shown["layer_switches"] = switch_table(streams, source)
    shown["layer_quality"] = quality_table(a.run.quality, source)
    figs["fig-layers"] = plot(lines, *span, source, a.run.events, out) if span else None


def section(n: int, shown: dict[str, Table], fig, collapsed) -> list[str]:
    """The report's part on layers: `fig` and `collapsed` are the page's own ways to show a figure
    and a long table."""
    return [f"<h2>Simulcast: {n} layers per browser publisher</h2>",
            fig("fig-layers", "Simulcast layer received, per receiver",
                "The picture height each browser received from each sender over the run (getStats "
                "frameHeight at every sample), named by the layer it is nearest to.",
                "Layers received: no browser received video."),
            html.table(shown["layers"]),
            html.table(shown["layer_switch_times"]) if shown["layer_switch_times"].rows else "",
            html.table(shown["layer_quality"]) if shown["layer_quality"].rows else "",
            collapsed(shown["layer_switches"], f"Show the {len(shown['layer_switches'].rows)} received streams' "
                      "switches", 10)]
