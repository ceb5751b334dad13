"""The adapter data the engine understands beyond start and health: profiles, secrets that go only
to the server's environment and to participants' tokens, the token itself, and where an SFU runs."""
import base64
import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from sfubench.config import ConfigError
from sfubench.lab import Host
from sfubench.sfu import Adapter, AdapterError, render

ROOT = Path(__file__).resolve().parent.parent
HOST = Host("ns", "veth0", "127.0.1.1")


def test_profiles_set_options_and_user_options_win():
    assert Adapter.load("janus").options["event_loops"] == 0
    assert Adapter.load("janus", profile="tuned", cores=2).options["event_loops"] == 2
    assert Adapter.load("mediasoup", profile="tuned", cores=3).options["workers"] == 3
    assert Adapter.load("janus", {"event_loops": "1"}, "tuned", cores=2).options["event_loops"] == 1
    with pytest.raises(ConfigError, match="janus has no profile 'fast'; it has: defaults, tuned"):
        Adapter.load("janus", profile="fast")


@pytest.mark.parametrize("value", ["-1", "nan", "1.5", "lots"])
def test_a_number_option_is_a_count_or_rate_at_least_0(value):
    with pytest.raises(ConfigError, match=f"janus option bitrate wants an integer >= 0 \\(default 0\\), got '{value}'"):
        Adapter.load("janus", {"bitrate": value})


def test_secrets_are_made_per_run_or_taken_from_the_environment(monkeypatch):
    a, b = Adapter.load("livekit"), Adapter.load("livekit")
    assert a.secrets["api_secret"] != b.secrets["api_secret"] and len(a.secrets["api_secret"]) >= 32
    monkeypatch.setenv("SFUBENCH_LIVEKIT_API_SECRET", "given")
    assert Adapter.load("livekit").secrets["api_secret"] == "given"


def test_secrets_reach_the_environment_but_no_file_or_argument(tmp_path):
    a = Adapter.load("livekit")
    values = a.values(HOST, tmp_path, tmp_path, tmp_path, "127.0.0.1")
    assert not [v for v in values.values() if a.secrets["api_secret"] in v]
    env = a.environment(values)
    assert env["LIVEKIT_KEYS"] == f"{a.secrets['api_key']}: {a.secrets['api_secret']}"
    with pytest.raises(AdapterError, match="unknown placeholder {secret_api_secret}"):
        render("keys: {secret_api_secret}", values, "a template")


def test_each_participant_gets_a_signed_token_naming_its_room_and_id(tmp_path):
    a = Adapter.load("livekit")
    url = a.client_url("http://127.0.0.1:1", 3, "r3u2", a.values(HOST, tmp_path, tmp_path, tmp_path, "127.0.0.1"), "{}")
    token = parse_qs(urlsplit(url).query)["token"][0]
    head, body, sig = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)   # noqa: E731
    expected = hmac.new(a.secrets["api_secret"].encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(pad(sig)) == expected
    claims = json.loads(base64.urlsafe_b64decode(pad(body)))
    assert claims["iss"] == a.secrets["api_key"] and claims["sub"] == "r3u2"
    assert claims["video"] == {"room": "3", "roomJoin": True, "canPublish": True, "canSubscribe": True}
    assert claims["exp"] - claims["nbf"] == 60 + 600   # valid ten minutes from its minting, not a day


def test_a_cloud_only_sfu_says_so_in_one_line():
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "jitsi"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "jitsi runs in the cloud only" in r.stderr


def test_list_sfus_shows_versions_profiles_and_where():
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "list-sfus"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0
    for line in ("janus      1.1.2      released 2023-01-17;", "jitsi", "the cloud only", "livekit    1.13.5",
                 "mediasoup  3.13.16    released 2024-01-10;", "profile tuned"):
        assert line in r.stdout, r.stdout


@pytest.fixture
def self_signed_https(tmp_path):
    """A real HTTPS server on 127.0.0.1 with a certificate it made itself, as Jitsi's install makes."""
    import http.server
    import ssl
    import threading
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Health)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}/about/health"
    httpd.shutdown()


def test_a_host_that_makes_its_own_certificate_is_checked_and_browsed_despite_it(self_signed_https, tmp_path):
    """Jitsi's install makes a self-signed certificate: its health check takes it and its browsers
    are told to; an SFU that says nothing of the kind keeps the verification."""
    from sfubench.sfuserver import Server
    jitsi, janus = Adapter.load("jitsi"), Adapter.load("janus")
    assert Server(jitsi.name, jitsi.self_signed, None, tmp_path / "log", self_signed_https, {})._probe()
    assert not Server(janus.name, janus.self_signed, None, tmp_path / "log", self_signed_https, {})._probe()
    assert jitsi.browser_flags() == ["--ignore-certificate-errors"] and janus.browser_flags() == []


def test_jitsis_server_process_stays_while_its_services_run_and_stops_them(tmp_path):
    """sfu-configs/jitsi/run.sh against a stand-in `systemctl` (Jitsi's packages cannot be had
    here): in the foreground while the services are active, exit 1 once one stops, and SIGTERM
    stops them and exits 0."""
    import os
    import signal
    import time
    state, calls = tmp_path / "active", tmp_path / "calls"
    fake = tmp_path / "bin" / "systemctl"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >>{calls}\ncase "$1" in\n  is-active) [ -e {state} ] ;;\n  *) exit 0 ;;\nesac\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    script = ROOT / "sfu-configs" / "jitsi" / "run.sh"

    state.touch()
    p = subprocess.Popen([str(script)], env=env, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert p.poll() is None
    state.unlink()
    assert p.wait(10) == 1 and "a service stopped" in p.stderr.read()

    state.touch()
    p = subprocess.Popen([str(script)], env=env, stderr=subprocess.DEVNULL)
    time.sleep(1)
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    assert calls.read_text().splitlines()[-1] == "stop prosody jicofo jitsi-videobridge2"
    assert calls.read_text().splitlines()[0] == "restart prosody jicofo jitsi-videobridge2"
