"""Fixtures for the browser tests: one headless Chromium per test module (launched on a
fresh profile directory), and for each test a page in a fresh context (its own
cookies, storage and cache).

A page may load nothing from outside 127.0.0.1 (the console's assets are pfar's own:
nothing is fetched at run time) and may raise no JavaScript error: either fails the
test when it ends, naming what was asked for or what was raised."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from .browser_support import CHROMIUM, CHROMIUM_ARGS, fresh_context, require_browser

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

# a page's own server: anything else is a request that leaves the machine
_OUTSIDE = re.compile(r"^(?!https?://127\.0\.0\.1[:/]).*", re.IGNORECASE)
# long enough for a loaded CI machine, short enough that a wait that never ends is
# reported well inside the test's own timeout
TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        # Playwright gives each launch a fresh temporary profile directory and removes
        # it when the browser closes
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser_page(browser: Browser) -> Iterator[Page]:
    context = fresh_context(browser)
    context.set_default_timeout(TIMEOUT_MS)
    outside: list[str] = []
    errors: list[str] = []

    def refuse(route: Route) -> None:
        outside.append(route.request.url)
        route.abort()

    context.route(_OUTSIDE, refuse)
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(f"{error.name}: {error.message}"))
    try:
        yield page
    finally:
        context.close()
    assert not outside, f"the page asked for something outside 127.0.0.1: {outside}"
    assert not errors, f"the page raised JavaScript errors: {errors}"
