"""A running loop task's conversation in a real browser against a real kernel process:
the model's answer appears on the task's page while the owner looks, without a
reload, its output shown as text, and the page fits a phone."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..console_support import CONSOLE_CONFIG, console_url, owner_token, serving
from ..support import make_home
from .browser_support import shoot

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

LOOP = '[loop]\ntools = ["file.write"]\nalways_allow = ["file.write"]\n'
# the first answer is slow: the page is open before it is journaled (15 s: opening the
# task's page and showing its first turn can take several seconds on a loaded machine,
# and the scripted model has no gate to hold it by)
SCRIPT = textwrap.dedent(
    """
    [[turns]]
    turn = 1
    delay_seconds = 15
    text = "I'll write the note. <script>window.pwned = true</script>"
    tool_calls = [ { name = "file.write", input = { path = "note.txt", content = "milk, eggs" } } ]

    [[turns]]
    text = "Done: note.txt holds the list."
    """
)


def test_a_running_loop_tasks_answer_appears_on_its_page_live(
    tmp_path: Path, browser_page: Page
) -> None:
    from playwright.sync_api import expect

    home = make_home(tmp_path / "home", config=CONSOLE_CONFIG + LOOP, script=SCRIPT)
    work = tmp_path / "work"
    work.mkdir()
    with serving(home) as kernel:
        url = console_url(home)
        browser_page.goto(url + "login")
        browser_page.get_by_label("Owner token").fill(owner_token(home))
        browser_page.get_by_role("button", name="Log in").click()
        browser_page.wait_for_url(url)

        started = kernel.request("loop", prompt="write my shopping list", directory=str(work))
        browser_page.goto(url + "tasks/" + started["task_id"])
        conversation = browser_page.locator("#conversation")
        turns = conversation.locator("li.turn")
        expect(turns.first).to_contain_text("write my shopping list")
        assert conversation.locator("li.turn-assistant").count() == 0  # the model still thinks
        browser_page.evaluate("window.notReloaded = true")

        # the answers arrive as they are journaled, on the same page
        expect(conversation.locator("li.turn-assistant")).to_have_count(2, timeout=45_000)
        expect(turns.last).to_contain_text("note.txt holds the list")
        assert browser_page.evaluate("window.notReloaded") is True
        # the timeline beside it reads again as the turns come (they are no bus events)
        expect(browser_page.locator("ol.timeline")).to_contain_text(
            "note.txt holds the list", timeout=10_000
        )
        first = conversation.locator("li.turn-assistant").first
        expect(first).to_contain_text("<script>window.pwned = true</script>")  # as text
        assert browser_page.evaluate("window.pwned") is None
        expect(first.locator(".call")).to_contain_text("file.write")
        expect(first.locator(".call")).to_contain_text("milk, eggs")
        expect(conversation.locator("li.turn-results")).to_contain_text("of step #1")
        shoot(browser_page, "conversation")

        browser_page.set_viewport_size({"width": 360, "height": 800})
        overflow = browser_page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"the task's page is {overflow}px wider than a phone"
