"""moto's server on 127.0.0.1: a stand-in for AWS's API, which no test here can reach, answering
real boto3 calls."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time

from sfubench.grid import free_port


@contextlib.contextmanager
def moto_server():
    """Yields the environment that points boto3 (and sfubench) at the server."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "moto's server did not start"
                time.sleep(0.2)
        yield {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1",
               "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_CONFIG_FILE": "/dev/null",
               "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
    finally:
        server.kill()
        server.wait()
