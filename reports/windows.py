"""Samples to per-stream windows: each stream's figures over one measurement window, from its samples
(schemas in docs/contracts.md), and the streams a window should have had. Units inside: bit/s, ms,
fractions."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator


MEASURED = ("ramp", "target")


def probe_edges(server: Iterable[dict]) -> dict[int, dict[str, dict[str, dict]]]:
    """server.jsonl's rows at measurement edges: window -> role -> "start"/"end" -> row (a row
    without a role is the SFU's, as the oldest runs wrote it)."""
    edges: dict = defaultdict(lambda: defaultdict(dict))
    for r in server:
        if r.get("edge") in ("start", "end") and r.get("window") is not None:
            edges[r["window"]][r.get("role") or "sfu"][r["edge"]] = r
    return edges


def stream_key(s: dict) -> tuple:
    return s.get("user"), s.get("peer"), s.get("direction"), s.get("kind"), s.get("ssrc")


def number(v) -> float | None:
    """v if it is a finite number, else None: a browser's getStats (or a damaged file) may hold
    nulls, strings or NaN, and none of them may turn into a figure. (v - v is 0 only for finite v.)"""
    return v if type(v) in (int, float) and v - v == 0 else None


def bitrate(first: dict, last: dict) -> float | None:
    """The study's bitrate: Δbytes × 8000 / Δt (t in ms) → bit/s; None when it cannot be known."""
    t0, t1, b0, b1 = number(first.get("t")), number(last.get("t")), number(first.get("bytes")), number(last.get("bytes"))
    if t0 is None or t1 is None or b0 is None or b1 is None:
        return None
    dt, db = t1 - t0, b1 - b0
    if dt <= 0 or db < 0:   # db < 0: the counter restarted (new connection)
        return None
    return db * 8000.0 / dt


def _delta(first: dict, last: dict, key: str) -> float | None:
    a, b = number(first.get(key)), number(last.get(key))
    if a is None or b is None or b < a:
        return None
    return b - a


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


# a received audio stream's playout counters (getStats inbound-rtp; docs/contracts.md), which
# reports/audio.py turns into what its listener heard
PLAYOUT = ("totalSamplesReceived", "concealedSamples", "silentConcealedSamples", "concealmentEvents",
           "insertedSamplesForDeceleration", "removedSamplesForAcceleration", "jitterBufferDelay",
           "jitterBufferEmittedCount", "jitterBufferMinimumDelay", "packetsDiscarded")


def _playout(first: dict, last: dict) -> dict:
    """Each playout counter's difference over a window (None where a sample lacks it, or it went
    back); _delta written out, as it runs nine times for every received audio stream and window."""
    out = {}
    for key in PLAYOUT:
        a, b = first.get(key), last.get(key)
        out[key] = b - a if (type(a) in _NUMBER and type(b) in _NUMBER and a - a == 0 and b - b == 0
                             and b >= a) else None
    return out


_NUMBER = (int, float)


def _between(first: dict, last: dict, obs: dict) -> None:
    """A stream's bitrate, span, losses and packets expected between two of its samples, into `obs`."""
    obs["bps"] = bitrate(first, last)
    t0, t1 = number(first.get("t")), obs["t"]
    if t0 is not None and t1 is not None:
        obs["dt"] = (t1 - t0) / 1000.0
    lost, packets = _delta(first, last, "packetsLost"), _delta(first, last, "packets")
    if lost is not None and packets is not None:
        obs["lost"] = lost
        # received packets do not count the lost ones; sent packets do
        obs["expected"] = packets + lost if obs["direction"] == "recv" else packets


def _heard(first: dict, last: dict, within: list[dict], phase, window) -> dict:
    """One audio stream in one window, with what an audio stream has of _observe's (no frames) and,
    received, its playout."""
    get = last.get
    received = get("direction") == "recv"
    obs = {"phase": phase, "window": window, "participants": get("participants"), "t": number(get("t")),
           "room": get("room"), "user": get("user"), "peer": get("peer"), "direction": get("direction"),
           "kind": "audio", "client": get("client") or "browser", "bps": None, "dt": None, "lost": None,
           "expected": None,
           "rtt": [r * 1000.0 for s in within if (r := number(s.get("rtt"))) is not None]}
    jitter = _avg(within, "jitter") if received else None
    obs["jitter_ms"] = jitter * 1000.0 if jitter is not None else None
    if first is not last:
        _between(first, last, obs)
        if received:
            obs["playout"] = _playout(first, last)
    return obs


def _avg(samples: list[dict], key: str) -> float | None:
    """Mean of one field over a window's samples; a plain loop because it runs for every stream window."""
    total, n = 0.0, 0
    for s in samples:
        v = number(s.get(key))
        if v is not None:
            total += v
            n += 1
    return total / n if n else None


def _observe(first: dict | None, last: dict, within: list[dict], phase, window) -> dict:
    """One stream in one window. `first` is None when there is nothing to take differences from.
    Written for speed: it runs once per stream and window (~200k times for 500 participants)."""
    get = last.get
    obs = {"phase": phase, "window": window, "participants": get("participants"), "t": number(get("t")),
           "room": get("room"), "user": get("user"), "peer": get("peer"), "direction": get("direction"),
           "kind": get("kind"), "client": get("client") or "browser", "bps": None, "dt": None, "lost": None, "expected": None, "freezes": None,
           "limit": get("qualityLimitationReason"), "height": number(get("frameHeight")),
           "codec": get("codec")}
    if len(within) == 1:
        rtt, jitter = number(get("rtt")), number(get("jitter"))
        obs["rtt"] = [rtt * 1000.0] if rtt is not None else []
        obs["fps"] = number(get("framesPerSecond"))
    else:
        obs["rtt"] = [r * 1000.0 for s in within if (r := number(s.get("rtt"))) is not None]
        jitter = _avg(within, "jitter")
        obs["fps"] = _avg(within, "framesPerSecond")
    obs["jitter_ms"] = jitter * 1000.0 if jitter is not None else None
    if first is not None and first is not last:
        _between(first, last, obs)
        obs["freezes"] = _delta(first, last, "freezeCount")
        obs["nacks"] = _delta(first, last, "nackCount")
        obs["plis"] = _delta(first, last, "pliCount")
    return obs


class StreamFold:
    """Samples to per-stream observations as the samples arrive (in time order per stream, as the
    collector appends them), for one pass over a run or a run still being written.

    Ramp and target windows: bitrate etc. between the window's first and last samples of the stream;
    their samples are held until the window is closed (close(), or pending() for the rest).
    Background windows hold one sample per stream, so differences are taken from the stream's previous
    background sample; the stream's first background sample only gives instantaneous values. Their
    observations come out of add() at once (a long run has millions: they are not kept)."""

    def __init__(self, kinds: tuple[str, ...] | None = ("video",)):
        self.kinds = kinds
        self.measured: dict[tuple, list[dict]] = {}   # (phase, window, stream) -> its samples
        self.previous: dict[tuple, dict] = {}

    def add(self, s: dict) -> dict | None:
        """Takes one sample; returns its observation if it is a background one."""
        if self.kinds is not None and s.get("kind") not in self.kinds:
            return None
        key = stream_key(s)
        if s.get("phase") == "background":
            o = _observe(self.previous.get(key), s, [s], "background", s.get("window"))
            self.previous[key] = s
            return o
        self.measured.setdefault((s.get("phase"), s.get("window"), key), []).append(s)
        return None

    def close(self, phase: str, window) -> list[dict]:
        """The observations of a measured window whose samples are all in, its samples let go."""
        keys = [k for k in self.measured if k[0] == phase and k[1] == window]
        return [_window_observation(k, self.measured.pop(k)) for k in keys]

    def drop(self, window) -> None:
        """Lets a discarded window's samples go, and every stream's previous background sample."""
        for k in [k for k in self.measured if k[1] == window]:
            del self.measured[k]
        self.forget_previous()

    def forget_previous(self) -> None:
        """The next background sample of each stream gives only instantaneous values."""
        self.previous.clear()

    def pending(self) -> Iterator[dict]:
        """The observations of the measured windows not closed, from their samples so far."""
        for k, group in self.measured.items():
            yield _window_observation(k, group)


def _window_observation(key: tuple, group: list[dict]) -> dict:
    group.sort(key=sample_time)
    return (_heard if key[2][3] == "audio" else _observe)(group[0], group[-1], group, key[0], key[1])


def iter_stream_windows(samples: Iterable[dict], kinds: tuple[str, ...] | None = ("video",)) -> Iterator[dict]:
    """One observation per (window, stream) of the given kinds (None: all); see StreamFold. The
    reports are about video; leaving audio out halves the work. Background observations come out as
    the samples stream in, ramp and target ones once the samples are exhausted."""
    fold = StreamFold(kinds)
    for s in samples:
        if (o := fold.add(s)) is not None:
            yield o
    yield from fold.pending()


def stream_windows(samples: Iterable[dict], kinds: tuple[str, ...] | None = ("video",)) -> list[dict]:
    return list(iter_stream_windows(samples, kinds))


def sample_time(s: dict) -> float:
    return s.get("t") or 0


def members(events: list[dict]) -> list[tuple[str, object, str]]:
    """(user, room, kind of client) of every participant started, in order."""
    started = sorted((e for e in events if e.get("event") == "participant_started" and e.get("user")),
                     key=sample_time)
    return [(e["user"], e.get("room"), e.get("client") or "browser") for e in started]


def viewers(events: list[dict]) -> set[str]:
    """The participants started as viewers, which publish nothing."""
    return {e["user"] for e in events if e.get("event") == "participant_started" and e.get("publishes") is False}


def missing_streams(obs: list[dict], events: list[dict], windows: list[dict] = ()) -> list[dict]:
    """A zero-bitrate observation for every video stream a measured window should have had and did
    not: each of the first `participants` started sends one, unless it is a viewer, and receives one
    from every other member of its room that is not. So a failed participant, a browser given up or
    a stream the SFU never delivered counts as a failed stream in every figure, instead of vanishing from the averages. The windows
    are those of windows.jsonl (so one in which no sample arrived at all counts too), else those
    the observations show."""
    started, watching = members(events), viewers(events)
    if not started:
        return []
    seen: dict[tuple, set] = defaultdict(set)
    measured: dict[tuple, dict] = {(w.get("phase"), w.get("window")): w for w in windows
                                   if w.get("phase") in MEASURED}
    for o in obs:
        if o["phase"] in MEASURED and o["kind"] == "video":
            key = (o["phase"], o["window"])
            measured.setdefault(key, o)
            seen[key].add((o["user"], o["peer"], o["direction"]))
    out = []
    for key, first in measured.items():
        present = started[:first.get("participants") or 0]
        room_of = {user: room for user, room, _ in present}
        client_of = {user: client for user, _, client in present}
        rooms: dict = defaultdict(list)
        for user, room, _ in present:
            rooms[room].append(user)
        for users in rooms.values():
            for user in users:
                want = [(user, None, "send")] * (user not in watching) + \
                    [(user, peer, "recv") for peer in users if peer != user and peer not in watching]
                for u, peer, direction in want:
                    if (u, peer, direction) not in seen[key]:
                        out.append({**{k: first.get(k) for k in ("phase", "window", "participants", "t")},
                                    "room": room_of[u], "user": u, "peer": peer, "client": client_of[u],
                                    "direction": direction, "kind": "video", "bps": 0.0, "dt": None,
                                    "lost": None, "expected": None, "freezes": None, "limit": None,
                                    "rtt": [], "fps": None, "jitter_ms": None, "missing": True})
    return out


class Totals:
    """Running sums over video stream observations: enough for means and pooled rates (no percentiles),
    so millions of background observations can be folded in and dropped."""
    MEANS = ("send_bps", "recv_bps", "rtt_send_ms", "rtt_recv_ms", "fps", "jitter_ms")

    def __init__(self):
        self.sum = dict.fromkeys(self.MEANS, 0.0)
        self.n = dict.fromkeys(self.MEANS, 0)
        self.lost = self.expected = self.freezes = self.freeze_s = 0.0
        self.t = None
        self.participants = None

    def _put(self, key: str, value, count: int = 1) -> None:
        self.sum[key] += value
        self.n[key] += count

    def add(self, o: dict) -> None:
        if o["kind"] != "video":
            return
        send = o["direction"] == "send"
        if o["t"] is not None and (self.t is None or o["t"] > self.t):
            self.t = o["t"]
        if o["participants"] is not None and (self.participants is None or o["participants"] > self.participants):
            self.participants = o["participants"]
        if o["bps"] is not None:
            self._put("send_bps" if send else "recv_bps", o["bps"])
        if o["rtt"]:
            self._put("rtt_send_ms" if send else "rtt_recv_ms", sum(o["rtt"]), len(o["rtt"]))
        if send:
            return
        if o["fps"] is not None:
            self._put("fps", o["fps"])
        if o["jitter_ms"] is not None:
            self._put("jitter_ms", o["jitter_ms"])
        if o["expected"]:
            self.lost += o["lost"]
            self.expected += o["expected"]
        if o["freezes"] is not None and o["dt"]:
            self.freezes += o["freezes"]
            self.freeze_s += o["dt"]

    def merge(self, other: "Totals") -> "Totals":
        for k in self.MEANS:
            self._put(k, other.sum[k], other.n[k])
        self.lost += other.lost
        self.expected += other.expected
        self.freezes += other.freezes
        self.freeze_s += other.freeze_s
        self.t = max((x for x in (self.t, other.t) if x is not None), default=None)
        self.participants = max((x for x in (self.participants, other.participants) if x is not None), default=None)
        return self

    def row(self) -> dict:
        out = {k: self.sum[k] / self.n[k] for k in self.MEANS if self.n[k]}
        if self.expected:
            out["loss_pct"] = 100.0 * self.lost / self.expected
        if self.freeze_s:
            out["freezes_per_min"] = self.freezes / (self.freeze_s / 60.0)
        return out


def window_totals(obs: Iterable[dict]) -> dict[tuple, Totals]:
    """(phase, window) -> Totals of its video observations."""
    totals: dict[tuple, Totals] = defaultdict(Totals)
    for o in obs:
        totals[(o["phase"], o["window"])].add(o)
    return totals
