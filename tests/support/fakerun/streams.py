"""The streams' getStats samples (samples.jsonl) as a page's probe writes them."""
from __future__ import annotations

from .model import Model

PROBE_FIELDS = ("availableOutgoingBitrate", "bytes", "codec", "direction", "frameHeight", "frameWidth", "framesDecoded",
                "framesDropped", "framesEncoded", "framesPerSecond", "freezeCount", "jitter", "kind", "nackCount",
                "packets", "packetsLost", "peer", "pliCount", "qpSum", "qualityLimitationBandwidth",
                "qualityLimitationCpu", "qualityLimitationReason", "rtt", "ssrc", "t", "targetBitrate",
                "totalFreezesDuration")


def stream(rng, user, peer, direction, kind) -> dict:
    """A stream's counters, cumulative from its first sample."""
    return {"user": user, "peer": peer, "direction": direction, "kind": kind,
            "ssrc": rng.getrandbits(32), "t": None, "bytes": 0, "packets": 0, "lost": 0.0,
            "frames": 0, "qp": 0, "freezes": 0, "freeze_s": 0.0, "nack": 0, "pli": 0,
            "played": 0.0, "concealed": 0.0, "buffered": 0.0}


def advance(st: dict, t: float, p: int, m: Model) -> None:
    if st["t"] is not None and t > st["t"]:
        dt = (t - st["t"]) / 1000.0
        d = m.degradation(p)
        nbytes = m.rate(p, st["direction"], st["kind"]) * dt / 8
        packets = nbytes / (1100 if st["kind"] == "video" else 80)
        st["bytes"] += int(nbytes)
        st["packets"] += int(packets)
        st["lost"] += packets * (0.001 + 0.08 * d) * m.noise(0.5)
        if st["kind"] == "audio":   # drawn from no random number: the video figures stay as they were
            st["played"] += 48_000 * dt
            st["concealed"] += 48_000 * dt * (0.002 + 0.2 * d)
            st["buffered"] += 48_000 * dt * (0.04 + 0.2 * d)
        if st["kind"] == "video":
            frames = dt * 30 * (1 - 0.6 * d)
            st["frames"] += int(frames)
            st["qp"] += int(frames * (20 + 40 * d))
            st["nack"] += int(packets * 0.02 * d * 10)
            st["pli"] += int(dt * d)
            if st["direction"] == "recv" and m.rng.random() < 4.0 * d * dt / 60:
                st["freezes"] += 1
                st["freeze_s"] += 0.2 + m.rng.random()
    st["t"] = t if st["t"] is None else max(t, st["t"])


def sample(st: dict, t: float, where: tuple, m: Model) -> dict:
    """One sample as the probe writes it, every field present, null where it does not apply;
    `where`: (phase, window, participants, room)."""
    phase, window, p, room = where
    advance(st, t, p, m)
    d = m.degradation(p)
    send, video = st["direction"] == "send", st["kind"] == "video"
    s = dict.fromkeys(PROBE_FIELDS)
    s.update({"t": round(st["t"], 3), "direction": st["direction"],
              "kind": st["kind"], "peer": st["peer"], "ssrc": st["ssrc"], "bytes": st["bytes"],
              "codec": "vp8" if video else "opus",
              "packets": st["packets"], "packetsLost": int(st["lost"]),
              "jitter": round((0.002 + 0.03 * d) * m.noise(0.3), 5), "rtt": round(m.rtt(p), 5)})
    if video:
        s.update({"framesEncoded" if send else "framesDecoded": st["frames"], "frameWidth": 540, "frameHeight": 360,
                  "framesPerSecond": round(30 * (1 - 0.6 * d) * m.noise(0.05), 1), "qpSum": st["qp"],
                  "nackCount": st["nack"], "pliCount": st["pli"]})
        if not send:
            s.update({"freezeCount": st["freezes"], "totalFreezesDuration": round(st["freeze_s"], 3)})
    if not send and not video:
        s.update({"totalSamplesReceived": int(st["played"]), "concealedSamples": int(st["concealed"]),
                  "silentConcealedSamples": int(st["concealed"] / 4), "concealmentEvents": int(st["concealed"] / 960),
                  "insertedSamplesForDeceleration": 0, "removedSamplesForAcceleration": 0,
                  "jitterBufferDelay": round(st["buffered"], 3), "jitterBufferEmittedCount": int(st["played"]),
                  "packetsDiscarded": 0})
    if send:
        rate = m.rate(p, "send", st["kind"])
        s.update({"availableOutgoingBitrate": round(rate * 1.3), "targetBitrate": round(rate)})
        if video:
            s.update({"qualityLimitationReason": "bandwidth" if d else "none", "qualityLimitationCpu": 0.0,
                      "qualityLimitationBandwidth": 0.0})
    s.update({"phase": phase, "window": window, "participants": p, "room": room, "user": st["user"]})
    return s
