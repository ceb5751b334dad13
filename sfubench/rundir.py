"""The run folder (docs/contracts.md): records are appended as JSON lines the moment they exist, so a
crash or Ctrl-C keeps everything collected until then."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from reports.runfiles import read_jsonl

STREAMS = ("samples", "checks", "events", "quality", "server", "playback", "windows", "frames")
FILES = {"frames": "frames/index.jsonl"}   # stream -> file, where it is not <stream>.jsonl


class RunDir:
    def __init__(self, path: Path):
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True)
        self._files = {}

    @classmethod
    def create(cls, out: Path, sfu: str) -> "RunDir":
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = out / f"{stamp}-{sfu}"
        n = 1
        while path.exists():
            n += 1
            path = out / f"{stamp}-{sfu}-{n}"
        return cls(path)

    def append(self, stream: str, record: dict) -> None:
        """Appends one record; also the run folder's subscription to the event bus."""
        if stream not in STREAMS:
            raise ValueError(f"unknown stream {stream}")
        record.setdefault("t", int(time.time() * 1000))
        f = self._files.get(stream)
        if f is None:
            path = self.path / FILES.get(stream, f"{stream}.jsonl")
            path.parent.mkdir(parents=True, exist_ok=True)
            f = self._files[stream] = open(path, "a", buffering=1)
        f.write(json.dumps(record, separators=(",", ":")) + "\n")

    def write_meta(self, meta: dict) -> None:
        tmp = self.path / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
        tmp.replace(self.path / "meta.json")

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def read(path: Path, stream: str) -> list[dict]:
    """Reads one stream; a last line cut short by a crash is skipped, not fatal."""
    file = path / f"{stream}.jsonl"
    return read_jsonl(file)[0] if file.exists() else []
