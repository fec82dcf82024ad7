"""The web console in headless Chromium (Selenium + the Debian chromium/chromium-driver packages): starting
the browser, finding elements, waiting for the page and keeping screenshots in tests/artifacts/screenshots/."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.support.ci import ci_is_set
from tests.support.harness import REPO_ROOT, BridgeServer

TOKEN = "console-e2e-token"
SCREENSHOTS = REPO_ROOT / "tests" / "artifacts" / "screenshots"


def _executable(env_name: str, *names: str) -> str | None:
    """`$env_name` if it names an executable file, else the first of `names` on PATH."""
    given = os.environ.get(env_name)
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    return next((found for name in names if (found := shutil.which(name))), None)


def _chromium() -> str | None:
    return _executable("AGUI_CHROMIUM", "chromium", "chromium-browser")


def _chromedriver() -> str | None:
    return _executable("AGUI_CHROMEDRIVER", "chromedriver")


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -r requirements-dev.txt)"
    if _chromium() is None or _chromedriver() is None:
        return "chromium and chromedriver are not installed (run: bash scripts/install-browser)"
    return None


@contextlib.contextmanager
def headless_chromium() -> Iterator[Any]:
    """A Selenium driver of headless Chromium; skips the test without a browser (fails it when CI is set)."""
    missing = _missing()
    if missing is not None:
        if ci_is_set():
            pytest.fail(f"console browser tests cannot run: {missing}; CI is set, so they may not be skipped")
        pytest.skip(f"console browser tests skipped: {missing}")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(_chromium())
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,1100", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(str(_chromedriver())), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


def wait_for(predicate: Callable[[], Any], timeout_s: float = 20, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as exc:  # a stale or missing element: try again
            last_error = exc
        else:
            if value:
                return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f" ({last_error!r})" if last_error else ""))


def css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def text_of(driver: Any, selector: str) -> str:
    return " ".join(str(e.text) for e in css(driver, selector))


def shoot(driver: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def open_console(driver: Any, bridge: BridgeServer, workspace: Path) -> None:
    driver.get(f"{bridge.url}console?cwd={quote(str(workspace), safe='')}")
    wait_for(lambda: css(driver, "#thread-status[data-state='new']"), what="the console to load")
    token = css(driver, "#token")[0]
    token.send_keys(TOKEN)
    token.send_keys("\t")  # change -> status refresh


def send_message(driver: Any, text: str) -> None:
    css(driver, "#message")[0].send_keys(text)
    css(driver, "#send")[0].click()


def assert_no_page_errors(driver: Any) -> None:
    problems = [
        entry
        for entry in driver.get_log("browser")
        if entry.get("source") in ("javascript", "security") or "Content Security Policy" in entry.get("message", "")
    ]
    assert problems == []


def query_of(driver: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(driver.current_url).query)
