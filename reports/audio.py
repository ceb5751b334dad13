"""What participants hear: each received audio stream's figures over a measurement window, their
aggregates by participant count, the Audio table, and the rule of the audio knee.

A browser gives what its jitter buffer played out (getStats inbound-rtp: totalSamplesReceived,
concealedSamples, jitterBufferDelay, ...). A synthetic receiver gives the same names from a model of
one (synth/receive.go: a buffer a fixed delay deep, no decoder), so its figures are estimates, which
the Audio table's note says.

Every stream also gets an E-model MOS (ITU-T G.107, quality/emodel.py). Its mouth-to-ear delay is
the network's one way, sender to SFU to receiver (half the sender's round trip to the SFU, from its
sent audio's receiver reports, plus half the receiver's, from its candidate pair or, for a
synthetic participant, its own audio's; either alone stands for both where the other is not
known), plus the receiver's jitter buffer's mean delay; its loss is the packets lost and those
discarded for coming too late to be played. Units inside: ms, %, per minute."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median
from functools import lru_cache
from typing import ClassVar

from quality import emodel, speech

from . import catalog
from .stats import spread
from .table import Table, rounded
from .windows import MEASURED, mean

@lru_cache(maxsize=65536)
def _mos(delay_ms: float, loss_pct: float) -> float:
    return emodel.mos(emodel.rating(emodel.for_stream(delay_ms, loss_pct)))


def _mean_rtt(o: dict | None) -> float | None:
    return sum(o["rtt"]) / len(o["rtt"]) if o and o.get("rtt") else None


def stream_figures(o: dict, sent: dict | None = None) -> dict:
    """One received audio observation's figures: concealment, the jitter buffer's delay, loss with
    the late packets, the E-model's delay and MOS (None where its counters do not give one).
    `sent`: the observation of the audio its sender sent in the same window, if there is one."""
    p = o.get("playout") or {}
    total, concealed = p.get("totalSamplesReceived"), p.get("concealedSamples")
    emitted, buffered = p.get("jitterBufferEmittedCount"), p.get("jitterBufferDelay")
    jb_ms = 1000.0 * buffered / emitted if emitted and buffered is not None else None
    held = p.get("jitterBufferMinimumDelay")
    loss = None
    if o.get("expected"):
        loss = 100.0 * (o["lost"] + (p.get("packetsDiscarded") or 0)) / o["expected"]
    legs = [r / 2 for r in (_mean_rtt(sent), _mean_rtt(o)) if r is not None]
    delay = (2 * legs[0] if len(legs) == 1 else sum(legs)) + jb_ms if legs and jb_ms is not None else None
    return {
        "audio_concealed_pct": 100.0 * concealed / total if total and concealed is not None else None,
        "audio_jb_ms": jb_ms,
        "audio_jb_held_ms": 1000.0 * held / emitted if emitted and held is not None else None,
        "audio_loss_pct": loss,
        "audio_delay_ms": delay,
        "audio_mos": _mos(round(delay), round(loss, 2)) if delay is not None and loss is not None else None,
    }


def _pooled(recv: list[dict], part: str, whole: str = "totalSamplesReceived") -> float | None:
    """100 x the sum of a playout counter over the sum of another, over the streams that have both."""
    pairs = [(o["playout"][part], o["playout"][whole]) for o in recv
             if o["playout"].get(part) is not None and o["playout"].get(whole)]
    total = sum(w for _, w in pairs)
    return 100.0 * sum(p for p, _ in pairs) / total if total else None


def audio_stats(obs: list[dict]) -> dict:
    """Aggregates over received audio observations (any mix of windows): means with their spread of
    the per-stream figures, and pooled shares of what the jitter buffers played out."""
    recv = [o for o in obs if o["kind"] == "audio" and o["direction"] == "recv" and o.get("playout") is not None]
    if not recv:
        return {}
    sent = {(o["phase"], o["window"], o["user"]): o for o in obs if o["kind"] == "audio" and o["direction"] == "send"}
    figures = [stream_figures(o, sent.get((o["phase"], o["window"], o["peer"]))) for o in recv]
    out = {"audio_streams": len(recv)}
    for key in ("audio_mos", "audio_delay_ms", "audio_jb_ms", "audio_jb_held_ms"):
        out.update(spread(key, [f[key] for f in figures]))
    out.update(spread("audio_jitter_ms", [o["jitter_ms"] for o in recv]))
    lost = sum(o["lost"] + (o["playout"].get("packetsDiscarded") or 0) for o in recv if o["expected"])
    expected = sum(o["expected"] for o in recv if o["expected"])
    if expected:
        out["audio_loss_pct"] = 100.0 * lost / expected
    for key, part in (("audio_concealed_pct", "concealedSamples"), ("audio_silent_pct", "silentConcealedSamples"),
                      ("audio_accelerated_pct", "removedSamplesForAcceleration"),
                      ("audio_decelerated_pct", "insertedSamplesForDeceleration")):
        if (v := _pooled(recv, part)) is not None:
            out[key] = v
    events = [(o["playout"]["concealmentEvents"], o["dt"]) for o in recv
              if o["playout"].get("concealmentEvents") is not None and o["dt"]]
    if minutes := sum(dt for _, dt in events) / 60.0:
        out["audio_concealments_per_min"] = sum(e for e, _ in events) / minutes
    return out


def audio_series(obs: list[dict]) -> list[dict]:
    """audio_stats of the ramp-up and target observations, by participant count."""
    groups: dict[int, list[dict]] = defaultdict(list)
    for o in obs:
        if o["phase"] in MEASURED and o["participants"] is not None:
            groups[o["participants"]].append(o)
    rows = [{"participants": p, **audio_stats(groups[p])} for p in sorted(groups)]
    return [r for r in rows if len(r) > 1]


def speech_stats(records: list[dict]) -> dict:
    """Over speech.jsonl's records (sfubench/scoring.py: each browser's recording of a stream it
    heard in a window): the mean ViSQOL and PESQ, and the median mouth-to-ear delay of the streams."""
    out = {}
    for key, name in (("visqol", "audio_visqol"), ("pesq", "audio_pesq")):
        if (v := mean(r.get(key) for r in records)) is not None:
            out[name] = v
    delays = [r["mouth_to_ear_ms"] for r in records if r.get("mouth_to_ear_ms") is not None]
    if delays:
        out["audio_mouth_to_ear_ms"] = median(delays)
    return out


def speech_series(records: list[dict]) -> list[dict]:
    """speech_stats by participant count."""
    groups: dict[int, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("participants") is not None:
            groups[r["participants"]].append(r)
    return [row for p in sorted(groups) if len(row := {"participants": p, **speech_stats(groups[p])}) > 1]


AUDIO_FIGURES = [f for f in (*catalog.FIGURES, *catalog.STEP_FIGURES) if f.section == "audio"]


def audio_table(series: list[dict], kinds: set[str]) -> Table:
    """The Audio section's table: every figure the catalogue puts there, by participant count.
    `kinds`: the kinds of client whose received audio it counts."""
    shown = [f for f in AUDIO_FIGURES if any(r.get(f.name) is not None for r in series)]
    rows = [[r["participants"], *(rounded(r[f.name] * f.scale, f.digits) if r.get(f.name) is not None else None
                                  for f in shown)] for r in series if r.get("audio_streams")]
    synthetic = ("Synthetic receivers do not decode: their concealment, late packets and jitter buffer "
                 "come from a model of a jitter buffer (synth/receive.go), estimates beside the "
                 "browsers' getStats. " if "synthetic" in kinds else "")
    scored = ""
    if any(r.get("audio_visqol") is not None for r in series):
        versions = speech.Scorer.versions()
        scored = (" ViSQOL, PESQ and the mouth-to-ear delay: browsers' recordings of each stream in each "
                  f"window, placed and timed by the audio codes in the microphone's speech; scored by "
                  f"{versions['visqol']}" + (f" and {versions['pesq']}" if versions["pesq"] else "") + ".")
    return Table("audio", "What participants hear, by participant count", ["participants", *(f.name for f in shown)],
                 rows, note=synthetic + "Concealed: samples the jitter buffer synthesised for lost or late "
                 "packets, of all it played out. E-model MOS (ITU-T G.107): per stream, its delay half "
                 "the receiver's round trip plus its jitter buffer's, its loss the packets lost or too "
                 f"late, Opus taken as Ie {emodel.OPUS_IE:g}, Bpl {emodel.OPUS_BPL:g} (quality/emodel.py says why)."
                 + scored)


@dataclass(frozen=True)
class AudioKneeRule:
    mos: float = 3.6               # the E-model MOS, mean over the received audio streams
    concealed_pct: float = 5.0     # received audio samples concealed
    name: ClassVar[str] = "audio knee"

    def text(self) -> str:
        return ("The audio knee is the first participant count at which — at that count and at the next one "
                f"measured — the received audio streams' mean E-model MOS falls below {self.mos:g} or more "
                f"than {self.concealed_pct:g}% of the samples their jitter buffers played out were concealed. "
                "Counts from the first client-bound one on are not judged, as for the video knee.")

    def criteria(self) -> tuple:
        """(series key, criterion, is bad, says why) for each of its limits (reports/knee.py)."""
        return (("audio_mos", "audio_mos", lambda v: v < self.mos,
                 lambda v: f"received audio's mean E-model MOS {v:.2f} is below {self.mos:g}"),
                ("audio_concealed_pct", "concealment", lambda v: v > self.concealed_pct,
                 lambda v: f"{v:.1f}% of the received audio was concealed, above {self.concealed_pct:g}%"))
