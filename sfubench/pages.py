"""Serves what the browsers load: the host page and the shared probe (sfubench/web), each adapter's
client page folder (/sfu/<name>/), and Debian's packaged JavaScript (/javascript/, Debian's own
convention, where janus.js lives)."""
from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .config import ROOT

WEB = Path(__file__).resolve().parent / "web"
MOUNTS = {"/sfu/": ROOT / "sfu-configs", "/javascript/": Path("/usr/share/javascript"), "/": WEB}


class _Handler(SimpleHTTPRequestHandler):
    def translate_path(self, path):
        path = path.split("?", 1)[0].split("#", 1)[0]
        for prefix, folder in MOUNTS.items():
            if path.startswith(prefix):
                # SimpleHTTPRequestHandler drops '..' and absolute parts relative to `directory`.
                self.directory = str(folder)
                return super().translate_path("/" + path[len(prefix):])
        return super().translate_path(path)

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


class PageServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.httpd = ThreadingHTTPServer((host, port), functools.partial(_Handler, directory=str(WEB)))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="pages", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
