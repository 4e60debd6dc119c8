"""The search console and the API reference in a real headless browser (Debian's chromium driven by chromedriver
through selenium) against a live service on loopback with an API key."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabric.serve.keys.store import KeyStore, Role
from tests.support.ingested import engine, ingested_home, live_service

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromedriver not installed: `make test-deps` installs Debian's chromium and chromium-driver",
)
ROOT = Path(__file__).resolve().parents[3]
MARKUP = "<img src=x onerror=alert(1)> script title"


async def _add_markup_entry(home: Path) -> None:
    from fabric.serve.service import ingest_tasks
    from fabric.serve.tasks.submission import parse_submission

    eng = engine(home)
    tasks = ingest_tasks(eng)
    await eng.open()
    await tasks.start()
    try:
        body = {"entries": [{"id": "x-1", "title": MARKUP, "text": "<b>bold</b> markup inside a passage"}]}
        task, _ = await tasks.submit(parse_submission(body, eng.settings.ingest, None))
        await task.done.wait()
    finally:
        await tasks.aclose()
        await eng.aclose()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A keyed service over the test entries (and one whose title is markup); yields (base URL, key)."""
    home = ingested_home(tmp_path)
    asyncio.run(_add_markup_entry(home))
    _, key = KeyStore(home).create("default", Role.from_str("reader"))
    with live_service(home) as url:
        yield url, key


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1200,1400", f"--user-data-dir={tmp_path / 'chrome'}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 120).until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def _search(driver: Any, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "query")
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, "go").click()


def _use_key(driver: Any, key: str) -> None:
    from selenium.webdriver.common.by import By

    if driver.find_element(By.ID, "keybox").get_attribute("open") is None:
        driver.find_element(By.CSS_SELECTOR, "#keybox summary").click()
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "savekey").click()


@needs_browser
def test_console_searches_shows_lanes_and_escapes(site: tuple[str, str], browser: Any) -> None:
    """The page loads without a key; with the key a search shows items with score bars and lane rows; an item whose
    title is markup is shown as text; a bad key shows the 401."""
    from selenium.webdriver.common.by import By

    url, key = site
    browser.get(url + "/")
    assert "search console" in browser.title
    _use_key(browser, key)
    assert browser.find_element(By.ID, "keystate").text == "a key is set for this session"
    _search(browser, "deployment strategy")
    _wait(browser, "#items li")
    items = browser.find_elements(By.CSS_SELECTOR, "#items li")
    assert items
    assert "blue-green" in browser.find_element(By.ID, "items").text
    assert browser.find_elements(By.CSS_SELECTOR, "#items .bars .bar")
    lanes = {row.get_attribute("data-lane") for row in browser.find_elements(By.CSS_SELECTOR, "#lanes tbody tr")}
    assert "keyword" in lanes
    assert "found for" in browser.find_element(By.ID, "summary").text
    if os.environ.get("FABRIC_CONSOLE_SCREENSHOT"):  # how docs/console.png is made
        browser.save_screenshot(os.environ["FABRIC_CONSOLE_SCREENSHOT"])

    _search(browser, "script title markup")
    _wait(browser, "#items li")
    assert MARKUP in browser.find_element(By.ID, "items").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#items img")
    assert not browser.find_elements(By.CSS_SELECTOR, "#items b")

    browser.find_element(By.ID, "forgetkey").click()
    _use_key(browser, "fab_000000000000_" + "x" * 43)
    _search(browser, "deployment strategy")
    assert _wait(browser, "#error").text.startswith("401")


@needs_browser
def test_api_reference_lists_the_operations(site: tuple[str, str], browser: Any) -> None:
    """/api renders every operation of /openapi.json, with request fields and responses."""
    url, _ = site
    browser.get(url + "/api")
    _wait(browser, "#operations section")
    text = browser.find_element("id", "operations").text
    assert "POST /v1/search" in text
    assert "GET /v1/audit" in text
    assert "query (required)" in text


async def test_pages_are_public_static_and_confined(site: tuple[str, str]) -> None:
    """The pages and assets answer without a key, under a CSP of this origin only; unknown assets are 404; the
    API still needs the key."""
    import aiohttp

    url, _ = site
    async with aiohttp.ClientSession() as http:
        for path, kind in (("/", "text/html"), ("/api", "text/html"), ("/static/console.js", "text/javascript")):
            async with http.get(url + path) as resp:
                assert resp.status == 200, path
                assert resp.headers["Content-Type"].startswith(kind)
                assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
                assert "unsafe-inline" not in resp.headers["Content-Security-Policy"]
        for path in ("/static/..%2Fkeys.sqlite", "/static/../keys.sqlite"):
            async with http.get(url + path) as resp:  # only the listed assets, never a file of the home
                assert resp.status in (401, 404), path
        async with http.get(url + "/static/index.j2") as resp:
            assert resp.status == 404
        async with http.post(url + "/v1/search", json={"query": "x"}) as resp:
            assert resp.status == 401
