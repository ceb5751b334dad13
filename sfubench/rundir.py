"""The run folder (docs/contracts.md): records are appended as JSON lines the moment they exist, so a
crash or Ctrl-C keeps everything collected until then."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from reports.runfiles import read_jsonl

STREAMS = ("samples", "checks", "events", "quality", "server", "playback", "windows", "frames", "audio")
FILES = {"frames": "frames/index.jsonl", "audio": "audio/index.jsonl"}   # stream -> file, where not <stream>.jsonl


class RunDirError(OSError):
    """The run folder cannot be written (a full disk, a removed folder)."""


class RunDir:
    def __init__(self, path: Path):
        self.path = path
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunDirError(f"cannot create the run folder {path}: {e.strerror}") from None
        self._files = {}
        self.failed: str | None = None   # the first write that failed; the run stops on it

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
        path = self.path / FILES.get(stream, f"{stream}.jsonl")
        try:
            f = self._files.get(stream)
            if f is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                f = self._files[stream] = open(path, "a", buffering=1)
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
        except OSError as e:
            self.failed = self.failed or f"cannot write {path}: {e.strerror or e}"
            raise RunDirError(self.failed) from None

    def check(self) -> None:
        """Raises RunDirError once a write has failed: a run that cannot keep its records stops."""
        if self.failed:
            raise RunDirError(self.failed)

    def write_meta(self, meta: dict) -> None:
        """Write-then-rename: meta.json is the old one or the new one, never half of either."""
        tmp = self.path / "meta.json.tmp"
        try:
            tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
            tmp.replace(self.path / "meta.json")
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise RunDirError(f"cannot write {self.path / 'meta.json'}: {e.strerror or e}") from None

    def close(self) -> None:
        for f in self._files.values():
            try:
                f.close()
            except OSError:
                pass   # its last line is lost with the disk; readers skip a cut-off line
        self._files.clear()


def read(path: Path, stream: str) -> list[dict]:
    """Reads one stream; a last line cut short by a crash is skipped, not fatal."""
    file = path / FILES.get(stream, f"{stream}.jsonl")
    return read_jsonl(file)[0] if file.exists() else []
