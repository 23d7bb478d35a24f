"""Headless Chromium for the browser tests (the HTML report, ``sealeval view``).

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``.ci/run``
installs them). Without them :func:`headless_chromium` fails the test with the
install line: a browser test is never skipped.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

__all__ = ["CHROMEDRIVER", "CHROMIUM", "headless_chromium", "requested_urls"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: No background traffic: this machine has no network, CI neither.
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


@contextlib.contextmanager
def headless_chromium(profile: Path, *, purpose: str, window: str) -> Iterator[WebDriver]:
    """Yield a headless Chromium with its DevTools network log on, profile in ``profile``.

    ``purpose`` names the test in the failure message; ``window`` is
    ``WIDTH,HEIGHT``.
    """
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"headless Chromium is required for the {purpose} but {missing} is missing: "
            "apt-get install -y chromium chromium-driver (.ci/run installs them)"
        )
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in (*_FLAGS, f"--window-size={window}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(browser: WebDriver, url: str) -> list[str]:
    """Open ``url``; return the URL of every request the page made (DevTools log)."""
    browser.get_log("performance")  # drop earlier entries
    browser.get(url)
    requested = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
    return requested
