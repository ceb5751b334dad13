"""One path for everything a run produces (locust's event hooks): records of the run folder's streams
(`samples`, `events`, `checks`, ...) and `progress` lines for the terminal. Producers — the runner,
the collector's server threads, the probes — only emit; the run folder, the progress line and live
outputs (e.g. the Pushgateway) subscribe, so no part reaches into another to report what it saw."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

Handler = Callable[[str, dict], None]


class Bus:
    def __init__(self):
        self._subscribers: list[tuple[Handler, frozenset[str] | None]] = []
        # Records come from several threads; one lock keeps each file's lines whole and in order.
        self._lock = threading.RLock()

    def subscribe(self, handler: Handler, streams: Iterable[str] | None = None) -> None:
        """`handler(stream, record)` for every record of `streams` (all streams if None)."""
        with self._lock:
            self._subscribers.append((handler, frozenset(streams) if streams is not None else None))

    def emit(self, stream: str, record: dict) -> dict:
        record.setdefault("t", int(time.time() * 1000))
        with self._lock:
            for handler, streams in self._subscribers:
                if streams is None or stream in streams:
                    handler(stream, record)
        return record

    def event(self, name: str, participants: int, room=None, **fields) -> dict:
        """A run event (events.jsonl); `participants` is the count started so far."""
        return self.emit("events", {"event": name, "participants": participants, "room": room, **fields})

    def say(self, message: str, transient: bool = False) -> None:
        """A progress line for the terminal only."""
        self.emit("progress", {"message": message, "transient": transient})
