"""``sealeval view`` in headless Chromium: what flipped, side by side, searchable; no network.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``.ci/run``
installs them). Without them the test fails: it is never skipped.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import Select, WebDriverWait

from sealeval.view import ViewerServer, start_viewer
from support.browser import headless_chromium, requested_urls
from support.integration_samples import FLIPPED_ID, WRONG_ANSWER
from support.view_workspace import HOSTILE_OUTPUT, Workspace, build_workspace


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return build_workspace(tmp_path_factory.mktemp("view-browser"))


@pytest.fixture(scope="module")
def server(workspace: Workspace) -> Iterator[ViewerServer]:
    viewer, thread = start_viewer(workspace.root)
    try:
        yield viewer
    finally:
        viewer.shutdown()
        viewer.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    with headless_chromium(profile, purpose="viewer test", window="1400,1200") as driver:
        yield driver


def _open(browser: WebDriver, url: str) -> list[str]:
    """Open ``url``; return every URL the page requested (DevTools log)."""
    return requested_urls(browser, url)


def _only_loopback(server: ViewerServer, requested: list[str]) -> None:
    assert requested
    assert all(url.startswith(server.url) for url in requested), requested
    assert browser_resources_none(requested)


def browser_resources_none(requested: list[str]) -> bool:
    return len(requested) == 1  # the document itself: no script, style, font or image fetched


def _visible(element: WebElement) -> None:
    assert element.is_displayed()
    assert element.size["width"] > 0
    assert element.size["height"] > 0


def _png_pixels_vary(data: bytes) -> int:
    """Decode a PNG (8-bit RGB/RGBA) enough to count distinct pixel values (0 means blank)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position = 8
    idat = b""
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        chunk = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8
            channels = {2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat += chunk
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels + 1
    assert len(raw) == stride * height
    pixels: set[bytes] = set()
    previous = bytearray(stride - 1)
    for row in range(height):
        line = raw[row * stride : (row + 1) * stride]
        kind, values = line[0], bytearray(line[1:])
        for index in range(len(values)):
            left = values[index - channels] if index >= channels else 0
            up = previous[index]
            corner = previous[index - channels] if index >= channels else 0
            if kind == 1:
                values[index] = (values[index] + left) & 0xFF
            elif kind == 2:
                values[index] = (values[index] + up) & 0xFF
            elif kind == 3:
                values[index] = (values[index] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - corner
                nearest = min(
                    (abs(estimate - left), 0, left),
                    (abs(estimate - up), 1, up),
                    (abs(estimate - corner), 2, corner),
                )[2]
                values[index] = (values[index] + nearest) & 0xFF
        previous = values
        if row % 4 == 0:
            for column in range(0, width * channels, channels * 4):
                pixels.add(bytes(values[column : column + 3]))
    return len(pixels)


def _rows(browser: WebDriver) -> list[WebElement]:
    return browser.find_elements(By.CSS_SELECTOR, "table#flipped-cases tbody tr")


def _apply(browser: WebDriver) -> None:
    """Submit the filter form and wait for the new page."""
    table = browser.find_element(By.ID, "flipped-cases")
    browser.find_element(By.ID, "apply").click()
    WebDriverWait(browser, 20).until(staleness_of(table))
    WebDriverWait(browser, 20).until(lambda driver: driver.find_element(By.ID, "flipped-cases"))


def _cases_url(server: ViewerServer, workspace: Workspace, **query: str) -> str:
    return server.url + "cases?" + urlencode({"path": workspace.pack, **query})


def test_index_and_pack_page(
    browser: WebDriver, server: ViewerServer, workspace: Workspace
) -> None:
    _only_loopback(server, _open(browser, server.url))
    for kind in ("pack", "comparison", "run", "receipt"):
        _visible(browser.find_element(By.ID, f"kind-{kind}"))
    browser.find_element(By.LINK_TEXT, workspace.pack).click()
    assert browser.current_url.startswith(server.url + "pack?")
    decision = browser.find_element(By.ID, "decision")
    _visible(decision)
    assert "Policy not met" in decision.text
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.forest-plot")
    assert len(plots) == 1
    browser.execute_script("arguments[0].scrollIntoView()", plots[0])
    _visible(plots[0])
    assert browser.find_elements(By.CSS_SELECTOR, "table.scope-table")
    summary = browser.find_element(By.ID, "paired-summary")
    assert "regressed: 1" in summary.text
    browser.find_element(By.ID, "cases-link").click()
    assert browser.current_url.startswith(server.url + "cases?")


def test_flipped_cases_side_by_side_with_a_screenshot(
    browser: WebDriver, server: ViewerServer, workspace: Workspace, tmp_path: Path
) -> None:
    requested = _open(browser, _cases_url(server, workspace))
    _only_loopback(server, requested)
    table = browser.find_element(By.ID, "flipped-cases")
    _visible(table)
    rows = _rows(browser)
    assert [row.get_attribute("data-id") for row in rows] == [FLIPPED_ID]
    row = rows[0]
    assert row.find_element(By.CSS_SELECTOR, "td.change").text == "right → wrong"
    cells = {
        name: row.find_element(By.CSS_SELECTOR, f"td.{name}").text
        for name in ("input", "expected", "baseline-output", "subject-output")
    }
    assert "2+2" in cells["input"]
    assert cells["expected"] == "4"
    assert cells["baseline-output"] == "4"
    assert cells["subject-output"] == WRONG_ANSWER
    tops = {
        name: row.find_element(By.CSS_SELECTOR, f"td.{name}").location["y"]
        for name in ("input", "expected", "baseline-output", "subject-output")
    }
    assert len(set(tops.values())) == 1  # side by side, one row
    _visible(browser.find_element(By.ID, "decision-pill"))
    shot = table.screenshot_as_png
    (tmp_path / "flipped-cases.png").write_bytes(shot)
    width, height = struct.unpack(">II", shot[16:24])
    assert width >= 600
    assert height >= 40
    assert _png_pixels_vary(shot) >= 4  # text, borders and the red change label: not blank
    page = browser.get_screenshot_as_png()
    assert _png_pixels_vary(page) >= 4


def test_search_and_filters(browser: WebDriver, server: ViewerServer, workspace: Workspace) -> None:
    _open(browser, _cases_url(server, workspace))
    Select(browser.find_element(By.ID, "filter-change")).select_by_value("all")
    _apply(browser)
    every = {row.get_attribute("data-id") for row in _rows(browser)}
    assert len(every) == 4
    Select(browser.find_element(By.ID, "filter-slice")).select_by_value("easy")
    _apply(browser)
    easy = {row.get_attribute("data-id") for row in _rows(browser)}
    assert FLIPPED_ID in easy
    assert len(easy) == 2
    search = browser.find_element(By.ID, "filter-q")
    search.clear()
    search.send_keys("paris")
    _apply(browser)
    assert [row.get_attribute("data-id") for row in _rows(browser)] == ["2"]
    Select(browser.find_element(By.ID, "filter-metric")).select_by_value("includes")
    Select(browser.find_element(By.ID, "filter-change")).select_by_value("regressed")
    _apply(browser)
    assert _rows(browser) == []
    assert "0 of 0" in browser.find_element(By.ID, "shown").text
    _open(browser, _cases_url(server, workspace, change="missing"))
    missing = [row.get_attribute("data-id") for row in _rows(browser)]
    assert missing == ["q_err"]


def test_hostile_content_is_text(
    browser: WebDriver, server: ViewerServer, workspace: Workspace
) -> None:
    requested = _open(browser, server.url + "run?" + urlencode({"path": workspace.hostile_run}))
    _only_loopback(server, requested)
    assert browser.title != "owned"
    assert browser.execute_script("return document.querySelectorAll('script,img').length") == 0
    outputs = browser.find_elements(By.CSS_SELECTOR, "table#records td.output")
    assert outputs
    assert any(cell.text == HOSTILE_OUTPUT for cell in outputs)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
