"""Live samples as Prometheus text exposition, optionally pushed to a Pushgateway.

One series per stream and field, labelled sfu, run, room, user, peer, direction, kind, ssrc; only the latest
sample of each stream is exposed (a series may appear once per exposition). No timestamps: the Pushgateway
rejects pushed samples that carry them. Pushing happens only when a URL is configured.
"""
from __future__ import annotations

import base64
import queue
import threading
import urllib.parse
import urllib.request

from . import catalog
from .windows import stream_key

# metric name -> (sample field, type, help), from reports/catalog.py; the probe's fields are already
# in base units (s, bit/s)
METRICS = {f.prometheus: (f.name, f.kind, f.help) for f in catalog.FIELDS}
PARTICIPANTS = catalog.PARTICIPANTS.prometheus
RESULT = "sfubench_result"   # the run's figures at target: one family, labelled figure and stat
STREAM_LABELS = ("room", "user", "peer", "direction", "kind", "ssrc")


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: list[tuple[str, object]]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(v) -> str:
    return repr(float(v)) if isinstance(v, float) else str(v)


def exposition(samples: list[dict], labels: dict[str, str] | None = None, participants: int | None = None) -> str:
    """Text exposition (format 0.0.4) of the latest sample of each stream. `labels` (e.g. sfu, run) go on
    every series; `participants` adds the sfubench_participants gauge."""
    base = list((labels or {}).items())
    latest: dict[tuple, dict] = {}
    for s in samples:
        key = stream_key(s)
        if key not in latest or (s.get("t") or 0) >= (latest[key].get("t") or 0):
            latest[key] = s
    lines = []
    if participants is not None:
        lines += [f"# HELP {PARTICIPANTS} {catalog.PARTICIPANTS.help}", f"# TYPE {PARTICIPANTS} gauge",
                  f"{PARTICIPANTS}{_labels(base) if base else ''} {participants}"]
    for name, (field, kind, help_text) in METRICS.items():
        rows = [(s, s[field]) for s in latest.values() if isinstance(s.get(field), (int, float))
                and not isinstance(s.get(field), bool)]
        if not rows:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for s, value in rows:
            pairs = base + [(k, "" if s.get(k) is None else s.get(k)) for k in STREAM_LABELS]
            lines.append(f"{name}{_labels(pairs)} {_number(value)}")
    return "\n".join(lines) + "\n" if lines else ""


def results(headline: dict) -> str:
    """Text exposition of the run's figures at target (the report's headline): each catalogue figure
    as `sfubench_result{figure="...",stat="mean"}` and, for the per-stream figures, one series per
    percentile (stat="p50", ... "max"), in the figure's stored unit."""
    stats = {f.name: [("mean", f.name)] + ([(p, f"{f.name}_{p}") for p in catalog.PERCENTILES] if f.spread else [])
             for f in catalog.FIGURES}
    lines = []
    for figure, keys in stats.items():
        for stat, key in keys:
            v = headline.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                lines.append(f"{RESULT}{_labels([('figure', figure), ('stat', stat)])} {_number(v)}")
    if not lines:
        return ""
    return "\n".join([f"# HELP {RESULT} the run's figures at target (docs/metrics.md), by figure and statistic",
                      f"# TYPE {RESULT} gauge", *lines]) + "\n"


def push_url(gateway: str, job: str = "sfubench", grouping: dict[str, str] | None = None) -> str:
    """The Pushgateway path for a group; values with '/' use the base64 form the Pushgateway defines."""
    parts = [gateway.rstrip("/"), "metrics", "job", urllib.parse.quote(job, safe="")]
    for k, v in (grouping or {}).items():
        v = str(v)
        if "/" in v or not v:
            parts += [f"{k}@base64", base64.urlsafe_b64encode(v.encode()).decode() or "="]
        else:
            parts += [k, urllib.parse.quote(v, safe="")]
    return "/".join(parts)


def push(text: str, gateway: str, job: str = "sfubench", grouping: dict[str, str] | None = None,
         timeout: float = 5.0) -> None:
    """PUT the exposition to the Pushgateway, replacing the group's previous metrics."""
    req = urllib.request.Request(push_url(gateway, job, grouping), data=text.encode(), method="PUT",
                                 headers={"Content-Type": "text/plain; version=0.0.4"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        resp.read()


def publish(samples: list[dict], *, sfu: str, run: str, participants: int | None = None,
            pushgateway: str | None = None, job: str = "sfubench", instance: str = "") -> str:
    """Exposition of the samples labelled with sfu and run; pushed (grouped by sfu, run and the
    pushing `instance`, when given) only when a Pushgateway URL is configured. Returns the text either
    way."""
    text = exposition(samples, {"sfu": sfu, "run": run}, participants)
    if pushgateway:
        # the grouping labels are added to every series by the Pushgateway, so the text must not repeat them
        push(exposition(samples, participants=participants), pushgateway, job, grouping(sfu, run, instance))
    return text


def grouping(sfu: str, run: str, instance: str = "") -> dict[str, str]:
    return {"sfu": sfu, "run": run, **({"instance": instance} if instance else {})}


class Pusher:
    """A live output on the run's event bus: keeps each window's samples and pushes them when the
    window closes (windows.jsonl's record), so the Pushgateway sees every measurement as it ends. A
    Pushgateway that cannot be reached stops the pushing, never the run: `error` says why.

    The pushes go from a thread of its own, made with the Pusher: a thread keeps the network
    namespace it was made in, and the engine's thread moves into the local lab's clients namespace
    for the run (sfubench/lab.py), where the host's own addresses (a Pushgateway on 127.0.0.1, or
    one the host routes to) cannot be reached. It also keeps a slow Pushgateway from holding the
    measurements up.

    `instance` tells its pushes from another run's of the same name (a fleet's runners, started by
    one schedule, name their runs by the same second)."""

    def __init__(self, pushgateway: str, sfu: str, run: str, instance: str = ""):
        self.pushgateway, self.sfu, self.run, self.instance = pushgateway, sfu, run, instance
        self.pending: list[dict] = []
        self.error: str | None = None
        self.windows: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._push, name="pushgateway", daemon=True)
        self.thread.start()

    def __call__(self, stream: str, record: dict) -> None:
        if self.error is not None:
            return
        if stream == "samples":
            self.pending.append(record)
        elif stream == "windows":
            samples, self.pending = self.pending, []
            self.windows.put((samples, record.get("participants")))

    def _push(self) -> None:
        while (item := self.windows.get()) is not None:
            if self.error is not None:
                continue
            try:
                if isinstance(item, str):   # the run's results: a group of their own, which the live
                    push(item, self.pushgateway,     # pushes (replacing theirs) never touch
                         grouping={**grouping(self.sfu, self.run, self.instance), "result": "target"})
                else:
                    samples, participants = item
                    publish(samples, sfu=self.sfu, run=self.run, participants=participants,
                            pushgateway=self.pushgateway, instance=self.instance)
            except (OSError, ValueError) as e:
                self.error = f"{self.pushgateway}: {getattr(e, 'reason', None) or e}"

    def close(self, timeout: float = 30.0, results: str = "") -> None:
        """Pushes what is queued, then `results` (an exposition of the run's figures, see results()),
        for at most `timeout` seconds in all, then stops."""
        if results:
            self.windows.put(results)
        self.windows.put(None)
        self.thread.join(timeout)
        if self.thread.is_alive() and self.error is None:
            self.error = f"{self.pushgateway}: still pushing after {timeout:g} s; the last windows were not pushed"
