"""Progress on the terminal: one line per step; on a TTY, repeated status lines overwrite each other."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.start = time.monotonic()
        self.tty = self.stream.isatty()
        self.last_transient = None
        self.pending_newline = False

    def say(self, message: str, transient: bool = False) -> None:
        if transient and message == self.last_transient:
            return
        line = f"[{time.monotonic() - self.start:7.1f}s] {message}"
        if self.tty and transient:
            self.stream.write("\r\x1b[K" + line)
            self.pending_newline = True
        else:
            if self.pending_newline:
                self.stream.write("\r\x1b[K")
            self.stream.write(line + "\n")
            self.pending_newline = False
        self.last_transient = message if transient else None
        self.stream.flush()
