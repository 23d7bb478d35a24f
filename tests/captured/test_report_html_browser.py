"""The HTML report in a real headless Chromium: what a reviewer sees, no network, a screenshot.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``.ci/run``
installs them). Without them the test fails: it is never skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from sealeval.captured.pack_reader import EvidencePack, read_evidence_pack
from sealeval.captured.report import VerificationStatus, render_html
from support.browser import headless_chromium, requested_urls
from support.vectors import pack_folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    with headless_chromium(profile, purpose="HTML report test", window="1280,1400") as driver:
        yield driver


def _load(browser: WebDriver, path: Path) -> list[str]:
    """Open ``path`` and return the URLs of every request the page made (DevTools log)."""
    return requested_urls(browser, path.as_uri())


def _assert_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 800
    assert height >= 600
    assert len(data) > 20_000  # a rendered page, not a blank image
    return width, height


def _visible(browser: WebDriver, selector: str) -> str:
    element = browser.find_element(By.CSS_SELECTOR, selector)
    assert element.is_displayed(), selector
    assert element.size["width"] > 0
    assert element.size["height"] > 0
    return str(element.text)


def _check_page(browser: WebDriver, pack: EvidencePack, html_path: Path) -> None:
    requested = _load(browser, html_path)
    network = ("http:", "https:", "ws:", "wss:", "ftp:")
    assert not [url for url in requested if url.startswith(network)]
    page = html_path.as_uri()
    assert page in requested
    assert requested[requested.index(page) :] == [page]  # the document itself, nothing else
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert (
        browser.execute_script(
            "return document.querySelectorAll('script,img,link,iframe,object,embed,[src],"
            '[href]:not([href^="#"])\').length'
        )
        == 0
    )
    banner = _visible(browser, "#decision")
    label = {"pass": "Policy satisfied", "regression": "Policy not met"}.get(
        pack.decision, "More evidence needed"
    )
    assert label in banner
    location = browser.find_element(By.CSS_SELECTOR, "#decision").location
    assert location["y"] < 400  # the decision comes first
    assert "No verification authority" in _visible(browser, "#authority-notice")
    assert "Verification status" in _visible(browser, "#verification")
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.forest-plot")
    assert len(plots) == len(pack.policy.metrics)
    for plot in plots:
        browser.execute_script("arguments[0].scrollIntoView()", plot)
        assert plot.is_displayed()
        assert plot.size["width"] > 300
        assert plot.size["height"] > 60
        scopes = len(pack.policy.slices) + 1
        assert len(plot.find_elements(By.CSS_SELECTOR, "g.row")) == scopes
        assert plot.find_element(By.CSS_SELECTOR, "title").get_attribute("textContent")
    tables = browser.find_elements(By.CSS_SELECTOR, "table.scope-table")
    assert len(tables) == len(pack.policy.metrics)
    for entry in pack.report["metrics"]:
        row = browser.find_element(
            By.CSS_SELECTOR,
            f"table.scope-table tr#result-{1 + list(pack.report['metrics']).index(entry)}",
        )
        browser.execute_script("arguments[0].scrollIntoView()", row)
        assert row.is_displayed()
        text = row.text
        assert f"{entry['count']:,}" in text
        for record_id in entry["missing_ids"][:20]:
            assert record_id in text
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(By.ID, "bindings"))
    bindings = _visible(browser, "#bindings")
    assert pack.manifest_digest in bindings
    for digest in pack.report["bindings"].values():
        assert digest in bindings


@pytest.mark.parametrize(
    ("name", "verification"),
    [
        ("missing-insufficient-signed", None),
        ("text-200-multi-signed", VerificationStatus("policy_fail", receipt_checked=True)),
    ],
)
def test_html_report_in_headless_chromium(
    browser: WebDriver, tmp_path: Path, name: str, verification: VerificationStatus | None
) -> None:
    pack = read_evidence_pack(pack_folder(name) / "evidence")
    html_path = tmp_path / "report.html"
    html_path.write_text(render_html(pack, verification=verification), encoding="utf-8")
    _check_page(browser, pack, html_path)
    status = _visible(browser, "#verification-status")
    if verification is None:
        assert status == "Not verified"
    else:
        assert "verification status 7" in status
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot = tmp_path / "screenshot.png"
    assert browser.save_screenshot(str(screenshot))
    _assert_png(screenshot)
