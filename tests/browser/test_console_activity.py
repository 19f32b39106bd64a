"""The console's /activity page in a real browser, after a task made real model calls
(an OpenAI-compatible loopback server, priced): its charts are drawn from the figures
the page embeds (no request beyond 127.0.0.1, no JavaScript error: the fixture checks),
their tables are there for whoever needs them, and nothing runs off a phone's screen."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from ..console_support import console_url, owner_token, serving
from ..integration.openai_server import OpenAIServer, Stream, text_stream
from ..integration.test_console_activity import _priced_home
from ..integration.test_model_pipeline import META, PLAN, _tool_stream
from ..support import pfar, wait_for
from .browser_support import shoot

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

CHARTS = ("#chart-tasks", "#chart-tokens", "#chart-cost", "#chart-templates")


def test_the_activity_page_draws_its_charts_and_fits_a_phone(
    tmp_path: Path, browser_page: Page
) -> None:
    from playwright.sync_api import expect

    server = OpenAIServer()
    try:
        server.script(
            Stream(_tool_stream("record_metadata", META)),
            Stream(_tool_stream("submit_plan", PLAN)),
            Stream(text_stream("Saved ", "your note.")),
        )
        home = _priced_home(tmp_path / "home", server)
        with serving(home):
            url = console_url(home)
            assert pfar(home, "submit", "note", "remember to buy milk").returncode == 0
            api = httpx.Client(base_url=url, timeout=20)
            owner = {"authorization": f"Bearer {owner_token(home)}"}

            def done() -> bool:
                listed = api.post("/api/tasks", json={}, headers=owner).json()["result"]
                return bool(listed) and listed[0]["state"] == "Completed"

            wait_for(done, what="the note task to complete")
            page = browser_page
            page.goto(url + "login")
            page.get_by_label("Owner token").fill(owner_token(home))
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(url)
            page.get_by_role("link", name="Activity").click()
            expect(page.get_by_role("heading", name="Activity", level=1)).to_be_visible()
            for chart in CHARTS:  # uPlot draws each chart on a canvas
                expect(page.locator(f"{chart} canvas").first).to_be_visible()
            # the tables fold away once the charts are drawn, and open with a click
            figures = page.locator("details.figures")
            assert figures.count() == 4
            assert not figures.first.evaluate("d => d.open")
            figures.nth(2).locator("summary").click()
            expect(figures.nth(2).get_by_role("cell", name="openai/gpt-test").first).to_be_visible()
            shoot(page, "activity")

            # by keyboard: the window's field is labelled, and the form is a plain GET
            page.get_by_label("Days", exact=True).select_option("7")
            page.get_by_label("Days", exact=True).focus()
            page.keyboard.press("Tab")
            page.keyboard.press("Enter")
            page.wait_for_url(url + "activity?days=7")
            expect(page.locator("#chart-tasks canvas").first).to_be_visible()

            page.set_viewport_size({"width": 360, "height": 780})
            page.reload()
            for chart in CHARTS:
                expect(page.locator(f"{chart} canvas").first).to_be_visible()
            for details in figures.all():
                details.evaluate("d => { d.open = true; }")
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"/activity is {overflow}px wider than a phone"
            widest = page.evaluate(
                "Math.max(...[...document.querySelectorAll('.chart canvas')]"
                ".map(c => c.getBoundingClientRect().right))"
            )
            assert widest <= 360, f"a chart reaches {widest}px on a 360px screen"
    finally:
        server.close()
