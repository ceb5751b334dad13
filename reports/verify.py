"""Render a report in headless Chromium and list what is broken.

Used by the tests on fake runs (tests/support/fakerun) and real ones:

    problems = check_rendered(run_dir / "report.html", expect=run.FIGURES, screenshot=run_dir / "report.png")
    assert not problems, problems
"""
from __future__ import annotations

import base64
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")
MAX_SCREENSHOT_HEIGHT = 16000   # Chromium cannot capture taller surfaces in one piece

_INSPECT = r"""
const problems = [];
const imgs = Array.from(document.images);
imgs.forEach(img => {
  if (!img.complete || img.naturalWidth === 0)
    problems.push(`image ${img.getAttribute('src')} (${img.alt}) did not load`);
});
Array.from(document.querySelectorAll('table')).forEach((t, i) => {
  const name = t.id || (t.caption && t.caption.textContent) || `table #${i + 1}`;
  const rows = Array.from(t.tBodies).flatMap(b => Array.from(b.rows));
  if (!rows.length) problems.push(`table ${name} has no rows`);
  else if (!rows.some(r => Array.from(r.cells).some(c => c.textContent.trim() && c.textContent.trim() !== '—')))
    problems.push(`table ${name} has only empty cells`);
});
for (const id of arguments[0]) {
  if (!document.getElementById(id)) problems.push(`element #${id} is missing`);
}
document.querySelectorAll('[src], [href]').forEach(el => {
  const ref = el.getAttribute('src') || el.getAttribute('href');
  if (/^(https?:)?\/\//i.test(ref)) problems.push(`external reference ${ref}`);
});
performance.getEntriesByType('resource').forEach(r => {
  if (!r.name.startsWith('file:')) problems.push(`fetched ${r.name}`);
});
if (!document.title) problems.push('page has no title');
return {problems};
"""


@contextmanager
def browser(width: int = 1280, height: int = 900):
    """A headless Chromium with a fresh profile, removed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # Selenium Manager would otherwise look up drivers online; the binaries are given explicitly.
    os.environ.setdefault("SE_OFFLINE", "true")
    profile = tempfile.mkdtemp(prefix="sfubench-verify-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot_full_page(driver, path: str | Path) -> Path:
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    width, height = int(size["width"]), min(int(size["height"]), MAX_SCREENSHOT_HEIGHT)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    path = Path(path)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def check_rendered(html_path: str | Path, expect: tuple[str, ...] | list[str] = (),
                   screenshot: str | Path | None = None, driver=None, timeout: float = 20.0) -> list[str]:
    """Problems with the rendered page: images that did not load, empty tables, missing element ids
    (`expect`), references to the network. Empty list = fine. Optionally saves a full-page screenshot."""
    html_path = Path(html_path)
    if not html_path.exists():
        return [f"{html_path} does not exist"]
    if driver is None:
        with browser() as own:
            return check_rendered(html_path, expect, screenshot, own, timeout)
    driver.get(html_path.resolve().as_uri())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script(
                "return document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"):
            break
        time.sleep(0.1)
    result = driver.execute_script(_INSPECT, list(expect))
    problems = list(result["problems"])
    if screenshot is not None:
        screenshot_full_page(driver, screenshot)
    return problems
