"""The engine's web server, the one address browsers talk to: it serves the host page, the shared
probe and sampler (sfubench/web), each adapter's client page folder (/sfu/<name>/) and Debian's
packaged JavaScript (/javascript/, Debian's own convention, where janus.js lives); and it carries the
page contract's traffic, handed to the collector: /collect (a record a page posts; the answer holds
the commands waiting for the page), /frame (a captured frame) and /audio (a recording of what a page
heard, or of its own microphone). Connections are kept alive:
pages post several times a second. A post must carry the run's token (agent.TOKEN_HEADER; the pages
have it from their URL's settings, the generators from their environment), or it is refused before
its body is read; what is served to GETs is the project's own files, the same for every run.
"""
from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from .agent import BoundedServer, InTime, token_carried
from .config import ROOT

WEB = Path(__file__).resolve().parent / "web"
MOUNTS = {"/sfu/": ROOT / "sfu-configs", "/javascript/": Path("/usr/share/javascript"), "/": WEB}
MAX_BODY = 16 << 20          # a captured PNG is tens of KB, a recording a few MB; anything this large is not ours
# A page posts several times a second on one kept-alive connection or two: a connection idle this
# long is not a page's, and this many at once are more than a run's browsers open (64 at most).
IDLE_TIMEOUT_S = 60
MAX_CONNECTIONS = 512


def _not_json(name: str):
    raise ValueError(f"{name} is not a JSON number")


class _Handler(InTime, SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S   # the socket's: a client that sends nothing is let go
    collector = None   # set per server
    token = ""
    mounts = MOUNTS

    def translate_path(self, path):
        path = path.split("?", 1)[0].split("#", 1)[0]
        for prefix, folder in self.mounts.items():
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

    def _query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}

    def do_POST(self):
        if not token_carried(self.headers, self.token):
            self.close_connection = True   # its body is never read: nothing more on this connection
            self.send_error(403)
            return
        route = urlsplit(self.path).path
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if self.collector is None or route not in ("/collect", "/frame", "/audio") or not 0 <= length <= MAX_BODY:
            self.send_error(404 if length >= 0 else 400)
            return
        body = self.rfile.read(length)
        try:
            if route == "/collect":
                msg = json.loads(body, parse_constant=_not_json)
                if not isinstance(msg, dict):
                    raise ValueError("not an object")
                answer = json.dumps(self.collector.collect(msg)).encode()
            else:
                (self.collector.frame if route == "/frame" else self.collector.audio)(self._query(), body)
                answer = b"[]"
        except ValueError:
            self.send_error(400)
            return
        except Exception:   # e.g. the run folder's disk is full: the run reports it, not the page
            self.send_error(500)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


class PageServer:
    """`token`: the run's, which every post must carry. `mounts` adds URL prefixes served from other
    folders (e.g. an adapter's bundled client library); they take precedence over the standard ones."""

    def __init__(self, token: str, host: str = "127.0.0.1", port: int = 0, collector=None,
                 mounts: dict[str, Path] | None = None, max_connections: int = MAX_CONNECTIONS):
        if not token:
            raise ValueError("the page server needs the run's token")
        extra = dict(mounts or {})   # first: the catch-all "/" must come last
        handler = type("Handler", (_Handler,), {"collector": collector, "token": token, "mounts": {
            **extra, **{k: v for k, v in MOUNTS.items() if k not in extra}}})
        self.httpd = BoundedServer((host, port), functools.partial(handler, directory=str(WEB)), max_connections)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="pages", daemon=True)

    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
