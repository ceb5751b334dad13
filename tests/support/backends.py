"""Throwaway PostgreSQL, Pushgateway and Prometheus servers for the suite, from Debian's packages
(scripts/deps.sh installs them): each in a folder of its own, on 127.0.0.1 and a free port, stopped
and removed when the test is done."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from sfubench.grid import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _wait(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                r.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def postgres():
    """A PostgreSQL 15 server (trust authentication, the `postgres` role) yielding its URL. It runs
    as the package's `postgres` user, which PostgreSQL insists on; its data lives in a folder that
    user owns, outside pytest's (root-only) temporary tree."""
    folder = Path(tempfile.mkdtemp(prefix="sfubench-pg-"))
    shutil.chown(folder, "postgres", "postgres")
    data, port = folder / "data", free_port()

    def as_postgres(*argv):
        return subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True, text=True,
                              timeout=120, check=True)
    try:
        as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "--auth=trust", "--username=postgres", "-E", "UTF8")
        as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-t", "60", "-o",
                    f"-p {port} -k {folder} -c listen_addresses=127.0.0.1", "start")
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(data), "-m",
                            "fast", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _server(argv: list[str], ready: str, log: Path):
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        try:
            _wait(ready)
        except OSError:
            raise RuntimeError(f"{argv[0]} did not come up: {log.read_text()[-2000:]}") from None
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def pushgateway(folder: Path):
    """Debian's Pushgateway, yielding its URL. It keeps what it is pushed in memory only (Debian's
    build persists it to /var/lib/prometheus by default, which would carry pushes between tests)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with _server(["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="],
                 url + "/-/ready",
                 folder / "pushgateway.log"):
        yield url


class Prometheus:
    def __init__(self, url: str):
        self.url = url

    def query(self, expr: str) -> list[dict]:
        """The instant query's result vector (its HTTP API)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}",
                                    timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{expr}: {body}")
        return body["data"]["result"]


@contextmanager
def prometheus(folder: Path, scrape: str):
    """Debian's Prometheus scraping `scrape` (host:port) every second, the pushed labels kept
    (honor_labels, as a Pushgateway wants)."""
    port = free_port()
    config = folder / "prometheus.yml"
    config.write_text(json.dumps({   # YAML is a superset of JSON
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "pushgateway", "honor_labels": True,
                            "static_configs": [{"targets": [scrape]}]}]}))
    url = f"http://127.0.0.1:{port}"
    with _server(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={folder / 'tsdb'}",
                  f"--web.listen-address=127.0.0.1:{port}"], url + "/-/ready", folder / "prometheus.log"):
        yield Prometheus(url)
