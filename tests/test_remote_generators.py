"""How the engine spreads a remote run's synthetic participants over generators already running
(sfubench/synthetic.py RemoteGenerators). The generators here are recording HTTP servers on
127.0.0.1 in sfubench-synth's place: what is checked is the engine's side of `POST /command` (the
real generator takes them in tests/test_remote_grid.py, and synth's own test covers its endpoint)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sfubench.agent import TOKEN_HEADER
from sfubench.synthetic import RemoteGenerators


class Recorder:
    def __init__(self, address: str, port: int = 0):
        got = self.got = []
        tokens = self.tokens = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                tokens.append(self.headers.get(TOKEN_HEADER))
                got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((address, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def two():
    a = Recorder("127.0.0.1")
    b = Recorder("127.0.0.2", a.server.server_address[1])
    yield a, b
    a.close()
    b.close()


def test_joins_go_to_the_generator_carrying_the_fewest_and_leaves_follow_them(two):
    a, b = two
    failed = []
    port = a.server.server_address[1]
    gens = RemoteGenerators(f"http://synth:{port}/command", "http://127.0.0.9:4000/collect",
                            lambda user, reason: failed.append((user, reason)), "run-token",
                            addresses=lambda: ["127.0.0.1", "127.0.0.2"])
    for i in range(1, 5):
        gens.join(f"r1u{i}", 1, {"token": f"t{i}"}, "smallest")
    assert failed == []
    assert [m["user"] for m in a.got] == ["r1u1", "r1u3"] and [m["user"] for m in b.got] == ["r1u2", "r1u4"]
    assert a.got[0] == {"cmd": "join", "user": "r1u1", "room": 1, "params": {"token": "t1"},
                        "receive_layer": "smallest", "follow": True,
                        "collect": "http://127.0.0.9:4000/collect"}
    gens.leave("r1u2")
    assert b.got[-1] == {"cmd": "leave", "user": "r1u2"}
    gens.join("r1u5", 1, {})                      # b now carries one: the next goes there
    assert b.got[-1]["user"] == "r1u5"
    gens.stop()
    assert sorted(m["user"] for m in a.got + b.got if m["cmd"] == "leave") == ["r1u1", "r1u2", "r1u3", "r1u4", "r1u5"]
    assert set(a.tokens + b.tokens) == {"run-token"}   # every command carries the run's token


def test_a_participant_whose_generator_cannot_be_reached_fails_with_the_reason():
    failed = []
    gens = RemoteGenerators("http://127.0.0.1:1/command", "http://x/collect",
                            lambda user, reason: failed.append((user, reason)), "t")
    gens.join("r1u2", 1, {})
    assert failed and failed[0][0] == "r1u2" and "could not be reached" in failed[0][1], failed
    none = RemoteGenerators("http://synth:9480/command", "http://x/collect",
                            lambda user, reason: failed.append((user, reason)), "t", addresses=lambda: [])
    none.join("r1u3", 1, {})
    assert failed[-1] == ("r1u3", "no synthetic generator at http://synth:9480/command (none is listed)")
