"""The participant count where an SFU stops coping.

Works on a series of per-participant-count rows (see `series.stream_series` and friends): each row has
`participants` and, where measured, `recv_bps`, `rtt_send_ms`, `freezes_per_min` and `check_pass_rate`.
A criterion only fires when the next measured count is bad too (or there is none), so one noisy
measurement does not make a knee.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import median
from typing import ClassVar


@dataclass(frozen=True)
class KneeRule:
    bitrate_fraction: float = 0.8   # of the receive-bitrate plateau
    rtt_ms: float = 200.0           # mean sender RTT
    freezes_per_min: float = 1.0    # received video freezes per stream-minute
    min_pass_rate: float = 0.9      # share of video checks passing
    max_failed_streams: float = 0.1  # share of the video streams a window should have had and lacked
    loss_pct: float = 2.0           # received video packet loss
    name: ClassVar[str] = "knee"    # what its knees are called (Knee.of)

    def criteria(self) -> tuple:
        """(series key, criterion, is bad, says why) for each limit but the bitrate's plateau."""
        return (
            ("rtt_send_ms", "rtt", lambda v: v > self.rtt_ms,
             lambda v: f"mean sender RTT {v:.0f} ms is above {self.rtt_ms:g} ms"),
            ("loss_pct", "loss", lambda v: v > self.loss_pct,
             lambda v: f"received video lost {v:.1f}% of its packets, above {self.loss_pct:g}%"),
            ("freezes_per_min", "freezes", lambda v: v > self.freezes_per_min,
             lambda v: f"{v:.2f} freezes per stream-minute, above {self.freezes_per_min:g}"),
            ("check_pass_rate", "checks", lambda v: v < self.min_pass_rate,
             lambda v: f"only {v:.1%} of video checks pass (< {self.min_pass_rate:.0%})"),
            ("stream_failure_rate", "streams", lambda v: v > self.max_failed_streams,
             lambda v: f"{v:.1%} of the video streams carried nothing (> {self.max_failed_streams:.0%})"),
        )

    def text(self) -> str:
        return (
            "The knee is the first participant count at which — at that count and at the next one measured — "
            f"the mean received video bitrate per stream is below {self.bitrate_fraction:.0%} of its plateau "
            "(the highest 3-point running median up to that count), or the mean sender RTT is above "
            f"{self.rtt_ms:g} ms, or received video freezes exceed {self.freezes_per_min:g} per stream-minute, "
            f"or received video loses more than {self.loss_pct:g}% of its packets, "
            f"or fewer than {self.min_pass_rate:.0%} of the video checks pass, or more than "
            f"{self.max_failed_streams:.0%} of the video streams that should flow carry nothing (a failed "
            "participant's streams count as failed, never as absent). Only counts measured "
            "before the first client-bound one are judged; when none of them is a knee but a client-bound "
            "count exists, the run is \"client-bound at\" that count and names no SFU knee. A client-bound "
            "count below one where the clients had headroom (a knee narrowed down from above) is a passing "
            "state of the machine: it alone is left unjudged."
        )


@dataclass(frozen=True)
class Knee:
    participants: int | None = None
    criterion: str | None = None        # bitrate | rtt | loss | freezes | checks | streams | client;
                                        # an audio knee's: audio_mos | concealment | client
    detail: str = "the SFU coped with every load measured"
    plateau_bps: float | None = None
    stopped_on: int | None = None       # the knee the run stopped on, where its last windows take it back
    coped: int | None = None            # the most participants measured below the knee: where it lies between
    of: str = "knee"                    # the rule's name: "knee" (video) or "audio knee"

    @property
    def judged(self) -> int | None:
        """The knee a comparison of runs counts: the figures', else the one the run stopped on (the run
        measured nothing beyond it, so it bounds no knee from below)."""
        return self.participants if self.participants is not None else self.stopped_on

    def cell(self) -> str:
        """The knee in a table of runs: its count, marked where the run's last windows take it back."""
        if self.judged is None:
            return "none"
        return str(self.judged) if self.participants is not None else f"{self.judged} (unconfirmed)"

    @property
    def client_bound(self) -> bool:
        """The load generator, not the SFU, stopped the measuring here."""
        return self.criterion == "client"


def stop_reason(knee: Knee) -> str:
    """Why a run stopped on `knee`, as its target_reached event says (read back by as_stopped)."""
    return knee.detail if knee.client_bound else f"{knee.of} at {knee.participants} participants: {knee.detail}"


def as_stopped(knee: Knee, events: list[dict]) -> Knee:
    """A run stops on the knee its figures showed at that step; the windows after it (the target's)
    may take it back. The knee stays the whole run's, and says that the run stopped on one."""
    said = f"{knee.of} at "
    why = next((e["reason"] for e in events if e.get("event") == "target_reached"
                and str(e.get("reason", "")).startswith(said)), None)
    if knee.participants is not None or why is None:
        return knee
    return replace(knee, stopped_on=int(why[len(said):].split()[0]),
                   detail=f"{knee.detail}; the run stopped on a knee its figures showed then ({why}), "
                          "which its last windows do not confirm")


def _points(series: list[dict], key: str) -> list[tuple[int, float]]:
    return sorted((r["participants"], r[key]) for r in series if r.get(key) is not None)


def _first_sustained(bad: list[bool]) -> int | None:
    for i, b in enumerate(bad):
        if b and (i + 1 == len(bad) or bad[i + 1]):
            return i
    return None


def plateaus(values: list[float]) -> list[float]:
    """Running plateau: the highest median of 3 consecutive values so far. At the start the first value
    counts alone, then the lower of the first two, so one high early value does not set the plateau."""
    out, best = [], float("-inf")
    for i in range(len(values)):
        window = values[max(0, i - 2): i + 1]
        best = max(best, min(window) if len(window) == 2 else median(window))
        out.append(best)
    return out


def find_knee(series: list[dict], rule=KneeRule()) -> Knee:
    """The knee of `rule` (a KneeRule, or reports.audio's AudioKneeRule) over the counts measured
    before the first client-bound one (a row with `client_bound`); if there is none there but a
    client-bound count, the knee is "client-bound at" that count: what happened from there on
    describes the clients, not the SFU."""
    bound = clients_limit(series)
    series = [r for r in series if not r.get("client_bound")
              and (bound is None or r["participants"] < bound["participants"])]
    knee = _sfu_knee(series, rule)
    if knee.participants is not None:
        knee = replace(knee, coped=max((r["participants"] for r in series if r["participants"] < knee.participants),
                                       default=None))
    if knee.participants is None and bound is not None:
        below = max((r["participants"] for r in series), default=None)
        detail = (f"client-bound at {bound['participants']} participants "
                  f"({bound.get('client_reasons') or 'see the windows'})"
                  + (f"; the SFU coped with every load measured below it, up to {below}" if below else
                     "; no load below it was measured"))
        return Knee(bound["participants"], "client", detail, of=rule.name)
    return replace(knee, of=rule.name)


def clients_limit(series: list[dict]) -> dict | None:
    """The first client-bound row that no higher count measured with the clients' headroom takes
    back. A count measured after higher ones (a knee narrowed down from above) that finds its
    clients strained where they carried more before caught a passing state of the machine, not
    their limit: it is left unjudged, and the counts around it are judged."""
    rows = sorted(series, key=lambda r: r["participants"])
    for i, r in enumerate(rows):
        if r.get("client_bound") and not any(o.get("headroom") for o in rows[i + 1:]):
            return r
    return None


def _sfu_knee(series: list[dict], rule) -> Knee:
    """The earliest count any of `rule`'s limits finds (a KneeRule's, or reports.audio's
    AudioKneeRule's: whatever gives `criteria()`), the video bitrate's plateau first."""
    found: list[Knee] = []

    pts = _points(series, "recv_bps") if isinstance(rule, KneeRule) else []
    if pts:
        values = [v for _, v in pts]
        plat = plateaus(values)
        i = _first_sustained([v < rule.bitrate_fraction * p for v, p in zip(values, plat)])
        if i is not None:
            found.append(Knee(pts[i][0], "bitrate",
                              f"received video bitrate {values[i] / 1e6:.2f} Mbps is below "
                              f"{rule.bitrate_fraction:.0%} of its {plat[i] / 1e6:.2f} Mbps plateau",
                              plat[i]))

    for key, criterion, is_bad, describe in rule.criteria():
        pts = _points(series, key)
        i = _first_sustained([is_bad(v) for _, v in pts])
        if i is not None:
            found.append(Knee(pts[i][0], criterion, describe(pts[i][1])))

    if not found:
        return Knee()
    # the earliest wins; on a tie the order above (bitrate first) decides, as min() is stable
    return min(found, key=lambda k: k.participants)
