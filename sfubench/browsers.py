"""The run's browser sessions on the grid: opened as participants need them, every WebDriver call
counted (an overloaded or dead browser is a result of the run, and after LOST_AFTER failed calls in
a row it is given up with its participants), kept alive while the pages talk to the engine over
HTTP, and all quit at once at the end."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import urllib3.exceptions
from selenium.common.exceptions import WebDriverException

from .grid import GridLost

LOST_AFTER = 3   # consecutive failed WebDriver calls after which a browser is given up
QUIT_S = 10.0    # how long closing the browser sessions may take
# Joined pages talk to the engine over HTTP, not WebDriver, and a grid ends a session idle for its
# session timeout (Selenium's default 300 s; the local grid's an hour): each live browser gets a
# WebDriver call at least this often.
KEEP_S = 60.0


@dataclass(eq=False)
class Browser:
    index: int
    driver: object
    participants: list = field(default_factory=list)   # the runner's Participants it hosts
    failures: int = 0

    @property
    def lost(self) -> bool:
        return self.failures >= LOST_AFTER


class Browsers:
    """`open_browser()` returns a WebDriver already showing the host page; `event(name, **fields)`
    and `say(message)` report; `fail(participant, reason)` is the runner's."""

    def __init__(self, open_browser: Callable[[], object], event, say, fail):
        self.open_browser, self.event, self.say, self.fail = open_browser, event, say, fail
        self.items: list[Browser] = []
        self.next_keep = 0.0

    def with_room(self, per_browser: int) -> Browser | None:
        """The newest live browser hosting fewer than `per_browser` participants."""
        return next((b for b in reversed(self.items) if not b.lost and len(b.participants) < per_browser), None)

    def open(self) -> Browser:
        """A new session; one the grid could not open is kept as lost (its participants fail).
        GridLost (every session went with the grid) is the caller's to handle."""
        index = len(self.items) + 1
        self.say(f"browser {index}: opening a session")
        try:
            driver = self.open_browser()
        except GridLost:
            raise
        except Exception as e:   # GridError, WebDriverException: a result of the run, not a crash
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            self.event("browser_error", browser=index, call="open", reason=reason)
            self.say(f"browser {index}: could not be opened: {reason}")
            driver = None
        browser = Browser(index, driver, failures=LOST_AFTER if driver is None else 0)
        self.items.append(browser)
        return browser

    def attempt(self, browser: Browser, what: str, fn, *args):
        """One WebDriver call: its result (True for None), or None when it failed (the events say
        which calls failed)."""
        if browser.lost:
            return None
        try:
            result = fn(*args)
        # the browser's own error, or its grid's connection gone (the node lost with its browsers)
        except (WebDriverException, urllib3.exceptions.HTTPError, OSError) as e:
            browser.failures += 1
            reason = (getattr(e, "msg", None) or str(e) or type(e).__name__).strip().splitlines()[0]
            self.event("browser_error", browser=browser.index, call=what, reason=reason)
            self.say(f"browser {browser.index}: {what} failed: {reason}")
            if browser.lost:
                for p in browser.participants:
                    self.fail(p, f"browser {browser.index} stopped answering ({LOST_AFTER} calls "
                                 f"failed in a row)")
            return None
        browser.failures = 0
        return True if result is None else result

    def keep(self) -> None:
        """A cheap WebDriver call to each live browser, at most every KEEP_S: runs hold for hours."""
        now = time.monotonic()
        if now < self.next_keep:
            return
        self.next_keep = now + KEEP_S
        for browser in self.items:
            if browser.driver is not None:
                self.attempt(browser, "keep its session", lambda d=browser.driver: d.title)

    def close(self) -> None:
        """Quits every session, all at once, waiting QUIT_S at most: a frozen browser cannot
        answer, and the grid's and the lab's teardown end whatever is left."""
        drivers = [b.driver for b in self.items if b.driver is not None]
        self.items.clear()

        def quit(driver):
            try:
                driver.quit()
            except Exception:  # a dead session must not stop the others from closing
                pass
        threads = [threading.Thread(target=quit, args=(d,), daemon=True) for d in drivers]
        for t in threads:
            t.start()
        deadline = time.monotonic() + QUIT_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
