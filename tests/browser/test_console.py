"""The console in a real browser against a real kernel process: log in, see a task
arrive live, approve its question and watch it finish, see a question answered in
the CLI leave the page, and keep working across a SIGKILL and a restart."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..console_support import console_home, console_url, owner_token, serving
from ..support import KernelProcess, pfar
from .browser_support import shoot

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def _log_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "login")
    page.get_by_label("Owner token").fill(token)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(url)


def test_a_wrong_token_is_refused_and_the_owner_gets_in(tmp_path: Path, browser_page: Page) -> None:
    from playwright.sync_api import expect

    home = console_home(tmp_path / "home")
    with serving(home):
        url = console_url(home)
        browser_page.goto(url)
        expect(browser_page).to_have_url(url + "login")  # no session: the login page
        browser_page.get_by_label("Owner token").fill("not-the-token")
        browser_page.get_by_role("button", name="Log in").click()
        expect(browser_page.get_by_role("alert")).to_contain_text("not the owner token")
        shoot(browser_page, "login")
        # by keyboard alone: the token field has the focus, Enter sends the form
        expect(browser_page.get_by_label("Owner token")).to_be_focused()
        browser_page.keyboard.type(owner_token(home))
        browser_page.keyboard.press("Enter")
        expect(browser_page).to_have_url(url)
        expect(browser_page.get_by_role("heading", name="Needs you")).to_be_visible()
        expect(browser_page.locator("#live")).to_have_text("live")
        # at a phone's width nothing runs off the side of the page
        browser_page.set_viewport_size({"width": 390, "height": 844})
        for path in ("", "tasks", "tasks?state=Failed&text=x", "kernel", "recoveries"):
            browser_page.goto(url + path)
            overflow = browser_page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"/{path} is {overflow}px wider than a phone"
        browser_page.set_viewport_size({"width": 1280, "height": 800})
        browser_page.get_by_role("link", name="Kernel").click()
        expect(browser_page.get_by_role("heading", name="Chat channels")).to_be_visible()
        shoot(browser_page, "kernel")


def test_a_question_arrives_live_is_answered_and_its_task_finishes(
    tmp_path: Path, browser_page: Page
) -> None:
    from playwright.sync_api import expect

    home = console_home(tmp_path / "home")
    with serving(home):
        url = console_url(home)
        _log_in(browser_page, url, owner_token(home))
        expect(browser_page.locator("#live")).to_have_text("live")

        # a task submitted in the CLI asks: its question appears without a reload
        assert pfar(home, "submit", "run_command", "echo hello").returncode == 0
        question = browser_page.locator("article.question")
        expect(question).to_have_count(1)
        expect(question).to_contain_text("echo hello")  # the whole action it would allow
        shoot(browser_page, "needs-you")
        question.get_by_role("button", name="approve").click()
        expect(browser_page.locator(".said")).to_contain_text("approve")
        expect(browser_page.locator("article.question")).to_have_count(0)

        browser_page.get_by_role("link", name="Tasks").click()
        row = browser_page.locator("tbody tr").first
        expect(row).to_contain_text("Completed")  # live: it finished after the answer
        shoot(browser_page, "tasks")
        row.get_by_role("link").click()
        expect(browser_page.locator("h1")).to_contain_text("Completed")
        expect(browser_page.locator(".timeline")).to_contain_text("created from run_command")
        # who answered, and through which surface; each model call with its tokens
        answered = browser_page.locator(".timeline .entry-answered")
        expect(answered).to_contain_text("by console (session ")
        expect(browser_page.locator(".timeline .entry-model_call").first).to_contain_text(
            "tokens in"
        )
        browser_page.set_viewport_size({"width": 360, "height": 800})
        overflow = browser_page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"a task's page is {overflow}px wider than a phone"
        browser_page.set_viewport_size({"width": 1280, "height": 800})
        shoot(browser_page, "task")

        # a question answered in the CLI leaves the page by itself
        browser_page.get_by_role("link", name="Needs you").click()
        assert pfar(home, "submit", "run_command", "echo again").returncode == 0
        expect(browser_page.locator("article.question")).to_have_count(1)
        # (the CLI, not the test's own reads: Playwright's loop runs in this thread)
        listed = json.loads(pfar(home, "approvals", "--json").stdout)["approvals"]
        assert pfar(home, "deny", listed[0]["approval_id"]).returncode == 0
        expect(browser_page.locator("article.question")).to_have_count(0)


def test_the_page_says_it_lost_the_kernel_and_comes_back_after_a_sigkill(
    tmp_path: Path, browser_page: Page
) -> None:
    from playwright.sync_api import expect

    home = console_home(tmp_path / "home")
    kernel = KernelProcess(home)
    kernel.wait_ready()
    url = console_url(home)
    port = url.rsplit(":", 1)[1].rstrip("/")
    # the same port after the restart, as an owner's bookmark has it
    home.config.write_text(home.config.read_text().replace("port = 0", f"port = {port}"))
    try:
        _log_in(browser_page, url, owner_token(home))
        expect(browser_page.locator("#live")).to_have_text("live")
        first_boot = browser_page.locator(".recovery small").inner_text()
        assert pfar(home, "submit", "run_command", "echo before").returncode == 0
        expect(browser_page.locator("article.question")).to_have_count(1)

        kernel.kill()  # SIGKILL: no goodbye on the stream
        expect(browser_page.locator("#live")).to_contain_text("lost")
        kernel = KernelProcess(home)
        kernel.wait_ready()
        expect(browser_page.locator("#live")).to_contain_text("reconnected")
        # the page read itself again: the new start's report, the question still asked
        expect(browser_page.locator(".recovery small")).not_to_have_text(first_boot)
        expect(browser_page.locator(".recovery pre")).to_contain_text("System restarted")
        expect(browser_page.locator("article.question")).to_have_count(1)
        shoot(browser_page, "reconnected")
        # every start's report: the restart's names the task the question is about
        browser_page.get_by_role("link", name="Every start's report").click()
        expect(browser_page.get_by_role("heading", name="Recoveries", exact=True)).to_be_visible()
        expect(browser_page.locator("article.boot")).to_have_count(2)
        newest = browser_page.locator("article.boot").first
        expect(newest).to_contain_text("the kernel was killed")
        expect(newest.locator("pre")).to_contain_text("1 approval re-sent")
        task_link = newest.locator(".report-lines a")
        expect(task_link).to_have_count(1)
        browser_page.set_viewport_size({"width": 360, "height": 780})
        overflow = browser_page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"/recoveries is {overflow}px wider than a phone"
        browser_page.set_viewport_size({"width": 1280, "height": 800})
        shoot(browser_page, "recoveries")
        task_link.click()
        expect(browser_page).to_have_url(re.compile(r"/tasks/[0-9a-f-]{36}$"))
    finally:
        if kernel.proc.poll() is None:
            kernel.terminate()


def test_the_task_list_is_filtered_by_keyboard_and_fits_a_phone(
    tmp_path: Path, browser_page: Page
) -> None:
    from playwright.sync_api import expect

    home = console_home(tmp_path / "home")
    with serving(home):
        url = console_url(home)
        _log_in(browser_page, url, owner_token(home))
        browser_page.goto(url + "tasks")
        expect(browser_page.locator("#live")).to_have_text("live")
        for text in ("echo invoice 2030", "echo holiday plans"):
            assert pfar(home, "submit", "run_command", text).returncode == 0
        rows = browser_page.locator("tbody tr")
        expect(rows).to_have_count(2)  # arrived live
        expect(browser_page.get_by_role("button", name="Cancel task")).to_have_count(2)
        # by keyboard alone: into the text field, type, Enter sends the form
        browser_page.get_by_label("Text").focus()
        browser_page.keyboard.type("INVOICE")
        browser_page.keyboard.press("Enter")
        browser_page.wait_for_url("**/tasks?*text=INVOICE*")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("run_command")
        expect(browser_page.get_by_label("Text")).to_have_value("INVOICE")
        # the kind select, by arrow keys, then Enter from the text field again
        browser_page.get_by_label("Kind").focus()
        browser_page.keyboard.press("ArrowDown")  # any -> pipeline
        browser_page.get_by_label("Text").press("Enter")
        browser_page.wait_for_url("**kind=pipeline**")
        expect(rows).to_have_count(1)
        expect(browser_page.get_by_role("button", name="Cancel task")).to_have_count(1)
        shoot(browser_page, "tasks-filtered")
        for width in (360, 390):
            browser_page.set_viewport_size({"width": width, "height": 800})
            overflow = browser_page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"/tasks is {overflow}px wider than a {width}px phone"
