"""Selenium Grid 4 and the headless Chromium sessions every participant runs in.

`LocalGrid` runs the standalone grid (router + distributor + one node in one JVM) for the local lab; in the
cloud the same `chrome_options` / `open_session` talk to a hub with Chrome nodes instead, so nothing here
may assume the browser runs on the machine that calls it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import urllib3.exceptions
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options as ChromeOptions
from selenium.webdriver.remote.client_config import ClientConfig
from selenium.webdriver.remote.command import Command

from .config import cache_root

GRID_VERSION = "4.47.0"  # must match grid/pom.xml
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WINDOW_SIZE = (1980, 1280)  # the CoSMo/KITE study's browser window

_TEMPLATE = Path(__file__).resolve().parent.parent / "grid" / "standalone.toml.in"

# Loopback never goes through a proxy, whatever http_proxy says.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class GridError(RuntimeError):
    pass


class GridLost(GridError):
    """The grid stopped answering mid-run: no later room can have browsers."""


def grid_cache_dir(root: Path | None = None) -> Path:
    """Where grid/install.sh puts the grid jars (`<dir>/lib`), shared by every clone on the machine."""
    return (root or cache_root()) / f"grid-{GRID_VERSION}"


def install(dest: Path) -> None:
    """Fetches the grid jars into `dest` unless they are there already (grid/install.sh)."""
    script = Path(__file__).resolve().parent.parent / "grid" / "install.sh"
    r = subprocess.run([str(script), str(dest)], capture_output=True, text=True)
    if r.returncode:
        lines = (r.stderr or r.stdout).strip().splitlines()
        raise GridError(lines[-1] if lines else f"{script} failed with {r.returncode}")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _check_bindable(host: str, port: int) -> None:
    with socket.socket() as s:
        # Like the grid's own server socket, so leftover TIME_WAIT connections do not count as "in use".
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise GridError(f"cannot start the grid on {host}:{port}: {e.strerror}") from None


def _tail(path: Path, lines: int = 15) -> str:
    """The log's last lines, without Java stack frames, which would push the "Caused by" line out of view."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    text = [line for line in text if not re.match(r"\s+(at |\.\.\. \d+ more)", line)]
    return "\n".join(text[-lines:]) or "(empty log)"


class LocalGrid:
    """Selenium Grid standalone on one loopback port, driving Debian's Chromium.

    Runs in whatever network namespace the calling process is in; it binds 127.0.0.1 only.
    SESSION_REQUEST_TIMEOUT (how long the grid queues a new-session request) stays below
    `open_session`'s default timeout so a queued request is never served after its client gave up.
    `session_timeout` is the idle time after which the node kills a browser.
    """
    host = "127.0.0.1"
    SESSION_REQUEST_TIMEOUT = 100
    START_TIMEOUT_S = 60.0

    def __init__(self, cache_dir: Path, work_dir: Path, port: int, max_sessions: int, *,
                 session_timeout: int = 3600, wrap=lambda argv: argv):
        self.lib = Path(cache_dir) / "lib"
        self.work_dir = Path(work_dir)
        self.port = port
        self.max_sessions = max_sessions
        self.session_timeout = session_timeout
        self.wrap = wrap   # argv -> argv that first joins the clients' cgroup
        self.config = self.work_dir / "grid.toml"
        self.log = self.work_dir / "grid.log"
        self._proc: subprocess.Popen | None = None
        self._tmp: str | None = None
        self._recording: tuple[Path, Path] | None = None   # (being written, where it goes) by _class_archive

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> LocalGrid:
        if self._proc is not None:
            raise GridError("grid already started")
        if not any(self.lib.glob("selenium-grid-*.jar")):
            raise GridError(f"Selenium Grid jars missing in {self.lib}: run scripts/deps.sh grid")
        java = shutil.which("java")
        if java is None:
            raise GridError("java not found: run scripts/deps.sh apt")
        # Otherwise another grid on this port would answer /status and pass for ours.
        _check_bindable(self.host, self.port)

        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            string.Template(_TEMPLATE.read_text()).substitute(
                host=self.host,
                port=self.port,
                max_sessions=self.max_sessions,
                session_timeout=self.session_timeout,
                session_request_timeout=self.SESSION_REQUEST_TIMEOUT,
                chromedriver=CHROMEDRIVER,
                chromium=CHROMIUM,
            )
        )
        cmd = self.wrap([java, *self._class_archive(java), "-cp", f"{self.lib}/*",
                         "org.openqa.selenium.grid.Bootstrap", "standalone", "--config", str(self.config)])
        # chromedriver's profiles and Chromium's singleton-socket folders go to TMPDIR, and a killed browser
        # leaves them behind; a private TMPDIR lets stop() remove them all. It lives in /tmp rather than in
        # work_dir because the singleton socket's path must stay under the 108-byte Unix socket limit.
        self._tmp = tempfile.mkdtemp(prefix="sfubench-grid-")
        with open(self.log, "wb") as log:
            # Own process group: stop() can then kill chromedriver and Chromium along with the JVM.
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "SE_OFFLINE": "true", "TMPDIR": self._tmp}, start_new_session=True,
            )

        deadline = time.monotonic() + self.START_TIMEOUT_S
        while True:
            code = self._proc.poll()
            if code is not None:
                self.stop()
                raise GridError(f"grid exited with code {code} while starting; {self.log}:\n{_tail(self.log)}")
            try:
                if self.status().get("ready"):
                    return self
            except (OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise GridError(
                    f"grid not ready at {self.url} after {self.START_TIMEOUT_S:.0f} s; {self.log}:\n{_tail(self.log)}"
                )
            time.sleep(0.1)

    def _class_archive(self, java: str) -> list[str]:
        """The JVM's flags for an archive of the grid's loaded classes: the first grid on this JVM
        records it as it exits, every later one maps it and is ready sooner. An archive is only good
        for the JVM build that wrote it, so its name carries that build's size and time."""
        try:
            jvm = (Path(java).resolve().parent.parent / "lib" / "server" / "libjvm.so").stat()
        except OSError:   # a JVM laid out otherwise: it starts as it always did
            return []
        archive = self.lib.parent / f"classes-{jvm.st_size}-{int(jvm.st_mtime)}.jsa"
        if archive.exists():
            return [f"-XX:SharedArchiveFile={archive}"]
        # its own name until it is whole: two grids may record at once
        self._recording = (archive.with_name(f"{archive.name}.{os.getpid()}-{self.port}"), archive)
        # -Xlog:cds=off: the classes it cannot archive (generated at run time) are no warning for the log
        return [f"-XX:ArchiveClassesAtExit={self._recording[0]}", "-Xlog:cds=off"]

    def _keep_class_archive(self, exited: bool) -> None:
        """Keeps the archive this grid recorded if its JVM exited by itself (it writes the archive
        on the way out); one killed leaves a part, removed."""
        recording, self._recording = self._recording, None
        if recording is None:
            return
        written, archive = recording
        try:
            if exited and written.stat().st_size:
                os.replace(written, archive)
            else:
                written.unlink()
        except OSError:
            pass

    def status(self) -> dict:
        """The `value` of GET /status."""
        with _direct.open(f"{self.url}/status", timeout=5) as r:
            return json.load(r)["value"]

    def pids(self) -> list[int]:
        """The browsers' process roots: the JVM's children (chromedriver, whose tree holds its Chromium).

        The JVM itself is left out so that CPU measured over these trees is the browsers' own cost.
        """
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return []
        try:
            return [child.pid for child in psutil.Process(proc.pid).children()]
        except psutil.NoSuchProcess:
            return []

    def session_ids(self) -> list[str]:
        return [slot["session"]["sessionId"]
                for node in self.status().get("nodes", []) for slot in node["slots"] if slot["session"]]

    def session_count(self) -> int:
        return len(self.session_ids())

    def _quit(self, session_id: str) -> None:
        req = urllib.request.Request(f"{self.url}/session/{session_id}", method="DELETE")
        try:
            _direct.open(req, timeout=15).close()
        except OSError:
            pass

    def stop(self, grace: float = 10) -> None:
        """Quits sessions still open, then ends the grid and everything it started."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                # The JVM exits on SIGTERM without ending its sessions; quitting them first lets chromedriver
                # close each Chromium properly.
                try:
                    ids = self.session_ids()
                except (OSError, ValueError, KeyError):
                    ids = []
                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(self._quit, ids))
                proc.terminate()
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    pass
            exited = proc.poll() is not None and proc.returncode >= 0   # not by a signal it could not handle
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            self._keep_class_archive(exited)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> LocalGrid:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def check_answering(url: str, timeout: float = 10) -> None:
    """Raises GridLost when the grid at `url` no longer answers at all (a session that could not
    be opened from a grid that still answers is the run's result, not its end)."""
    try:
        with _direct.open(f"{url.rstrip('/')}/status", timeout=timeout) as r:
            r.read()
    except OSError as e:
        reason = getattr(e, "reason", None) or e
        raise GridLost(f"the Selenium Grid at {url} stopped answering during the run: {reason}") from None


def check_reachable(url: str, timeout: float = 10) -> None:
    """Raises GridError unless a Selenium Grid answers at `url` and says it is ready."""
    try:
        with _direct.open(f"{url.rstrip('/')}/status", timeout=timeout) as r:
            status = json.load(r)["value"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        reason = getattr(e, "reason", None) or e
        raise GridError(f"no Selenium Grid answers at {url}: {reason}") from None
    if not status.get("ready"):
        raise GridError(f"the Selenium Grid at {url} is not ready: {status.get('message') or 'no reason given'}")


def chrome_options(
    video: Path, audio: Path, user_data_dir: str | None = None, extra: Sequence[str] = (),
    binary: str | None = CHROMIUM,
) -> ChromeOptions:
    """Options for one participant's browser; `video` (y4m) and `audio` (wav) are paths on the node.
    `binary` None leaves the browser to the node's stereotype (a remote grid's own Chrome).

    The profile: by default no --user-data-dir is passed, so chromedriver creates a fresh temporary profile
    on the node for each session and deletes it on quit. That is the right choice for a grid, where the
    caller cannot create a directory on the node, and a fixed path shared by two sessions would make the
    second Chromium refuse to start. Pass `user_data_dir` only with a path that exists on the node and
    that no other live session uses.
    """
    o = ChromeOptions()
    if binary:
        o.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--allow-loopback-in-peer-connection",
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-video-capture={video}",
        f"--use-file-for-fake-audio-capture={audio}",
        "--autoplay-policy=no-user-gesture-required",
        f"--window-size={WINDOW_SIZE[0]},{WINDOW_SIZE[1]}",
        *([f"--user-data-dir={user_data_dir}"] if user_data_dir else []),
        *extra,
    ):
        o.add_argument(arg)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return o


def open_session(grid_url: str, options: ChromeOptions, timeout: float = 120) -> webdriver.Remote:
    """A browser session on the grid. `timeout` bounds the creation and every later command of the session."""
    config = ClientConfig(remote_server_addr=grid_url, timeout=timeout)
    try:
        return webdriver.Remote(command_executor=grid_url, options=options, client_config=config)
    except (WebDriverException, urllib3.exceptions.HTTPError, OSError) as e:
        detail = getattr(e, "msg", None) or str(e) or type(e).__name__
        first = next((line.strip() for line in detail.splitlines() if line.strip()), type(e).__name__)
        raise GridError(f"grid {grid_url} could not create a Chromium session: {first}") from e


def browser_log(driver: webdriver.Remote) -> list[dict]:
    """Console messages since the last call (needs the goog:loggingPrefs that chrome_options sets)."""
    return driver.execute(Command.GET_LOG, {"type": "browser"})["value"]


def chromium_version() -> str:
    """The version of /usr/bin/chromium, e.g. '156.0.8078.79', for run metadata."""
    out = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    m = re.search(r"\d+(\.\d+)+", out)
    if m is None:
        raise GridError(f"cannot read a version from `{CHROMIUM} --version`: {out.strip()!r}")
    return m.group(0)
