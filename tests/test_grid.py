"""The real Selenium Grid with real Chromium: fake camera/microphone files reach getUserMedia in a grid session."""

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from sfubench.grid import (
    GRID_VERSION, GridError, GridLost, LocalGrid, browser_log, check_answering, check_reachable, chrome_options,
    chromium_version, free_port, grid_cache_dir, open_session,
)

PAGE = """<!doctype html><video autoplay muted playsinline></video><script>
window.result = navigator.mediaDevices.getUserMedia({video: true, audio: true}).then(stream => {
  const video = document.querySelector('video');
  video.srcObject = stream;
  console.log('sfubench-gum-ok');
  // Resolves once decoded frames of the fake camera are being shown, not merely when the track exists.
  return new Promise(resolve => video.requestVideoFrameCallback(() => resolve({
    width: video.videoWidth, height: video.videoHeight,
    video: stream.getVideoTracks().length, audio: stream.getAudioTracks().length,
  })));
}, e => ({error: e.name + ': ' + e.message}));
</script>"""


def wait_sessions(grid, n, timeout=10):
    """The grid frees a slot shortly after the quit command returns, not before."""
    deadline = time.monotonic() + timeout
    while grid.session_count() != n and time.monotonic() < deadline:
        time.sleep(0.1)
    return grid.session_count()


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("media")
    video, audio = d / "cam.y4m", d / "mic.wav"
    for args in (["-f", "lavfi", "-i", "testsrc=size=160x120:rate=15", "-t", "2", "-pix_fmt", "yuv420p", video],
                 ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "2", audio]):
        subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True)
    return video, audio


def test_grid_version_matches_pom():
    pom = (Path(__file__).resolve().parent.parent / "grid" / "pom.xml").read_text()
    assert re.search(r"<artifactId>selenium-grid</artifactId>\s*<version>(.*?)</version>", pom)[1] == GRID_VERSION


def test_chromium_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", chromium_version())


def test_fake_media_session_in_grid(tmp_path, media):
    page = tmp_path / "gum.html"
    page.write_text(PAGE)
    port = free_port()
    grid = LocalGrid(grid_cache_dir(), tmp_path / "grid", port, max_sessions=2)
    with grid:
        assert grid.session_count() == 0
        driver = open_session(grid.url, chrome_options(*media), timeout=60)
        try:
            assert grid.session_count() == 1
            assert [psutil.Process(pid).name() for pid in grid.pids()] == ["chromedriver"]
            assert driver.capabilities["browserVersion"] == chromium_version()
            driver.get(page.as_uri())
            got = driver.execute_async_script("window.result.then(arguments[0])")
            assert got == {"width": 160, "height": 120, "video": 1, "audio": 1}
            assert any("sfubench-gum-ok" in entry["message"] for entry in browser_log(driver))
        finally:
            driver.quit()
        assert wait_sessions(grid, 0) == 0
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))  # fails if the grid still listens


def test_start_fails_clearly_on_busy_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        grid = LocalGrid(grid_cache_dir(), tmp_path, busy.getsockname()[1], max_sessions=1)
        with pytest.raises(GridError, match="already in use"):
            grid.start()


def test_open_session_error_is_one_line():
    with pytest.raises(GridError) as err:
        open_session(f"http://127.0.0.1:{free_port()}", chrome_options(Path("/v.y4m"), Path("/a.wav")), timeout=5)
    assert "could not create a Chromium session" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_hub_without_nodes_answers_but_is_not_ready_and_a_dead_one_is_lost(tmp_path):
    """A real Selenium hub with no node yet (a cloud grid before its first room scales the nodes):
    it answers, so a provisioned run may start, but it is not ready, which a grid given by address
    must be; once it is gone, the run learns that the grid is lost."""
    port = free_port()
    (tmp_path / "hub.toml").write_text(
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n[events]\npublish = "tcp://127.0.0.1:{free_port()}"\n'
        f'subscribe = "tcp://127.0.0.1:{free_port()}"\nbind = true\n[logging]\ntracing = false\n')
    hub = subprocess.Popen(["java", "-cp", f"{grid_cache_dir() / 'lib'}/*", "org.openqa.selenium.grid.Bootstrap",
                            "hub", "--config", str(tmp_path / "hub.toml")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.STDOUT, env={**os.environ, "SE_OFFLINE": "true"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                check_answering(url, timeout=2)
                break
            except GridLost:
                assert hub.poll() is None and time.monotonic() < deadline
                time.sleep(0.5)
        with pytest.raises(GridError, match="is not ready"):
            check_reachable(url)
    finally:
        hub.kill()
        hub.wait()
    with pytest.raises(GridLost, match=f"the Selenium Grid at {url} stopped answering during the run"):
        check_answering(url, timeout=2)


def _grid_on(cache: Path, work: Path) -> LocalGrid:
    """A grid whose cache (and so its class archive) is `cache`, its jars the installed ones."""
    if not (cache / "lib").exists():
        (cache / "lib").symlink_to(grid_cache_dir() / "lib")
    return LocalGrid(cache, work, free_port(), 1)


def test_the_first_grid_records_its_classes_and_every_later_one_maps_them(tmp_path):
    """A grid killed before it could write the archive leaves nothing; the next, stopped as a run
    stops it, leaves a whole archive; the one after maps it into its JVM."""
    cache = tmp_path / "cache"
    cache.mkdir()
    killed = _grid_on(cache, tmp_path / "killed").start()
    os.killpg(killed._proc.pid, 9)
    killed.stop()
    assert list(cache.glob("classes-*")) == []
    first = _grid_on(cache, tmp_path / "first").start()
    first.stop()
    (archive,) = cache.glob("classes-*")
    assert archive.suffix == ".jsa" and archive.stat().st_size > 1_000_000
    later = _grid_on(cache, tmp_path / "later").start()
    try:
        jvm = psutil.Process(later._proc.pid)
        jvm = next(p for p in [jvm, *jvm.children(recursive=True)] if p.name() == "java")
        assert str(archive) in {m.path for m in jvm.memory_maps()}
        assert "warning" not in (tmp_path / "later" / "grid.log").read_text()
    finally:
        later.stop()
    assert list(cache.glob("classes-*")) == [archive]
