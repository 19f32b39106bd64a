"""What the browser tests share: the Chromium they drive, a Starlette app served on
uvicorn for the length of a test, and screenshots for the docs.

The browser is the system's Chromium (Debian's `chromium`, which scripts/check.py
installs where it runs as root), never one Playwright downloads: Playwright's Python
package brings only its driver. Where Playwright or Chromium is missing the tests skip
and say why; under CI=true they fail.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import uvicorn
from starlette.types import ASGIApp

import pfar

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

ROOT = Path(__file__).resolve().parents[2]
# the console's stylesheets, scripts and vendored libraries, as an installed pfar has them
STATIC = Path(pfar.__file__).resolve().parent / "console" / "static"
CHROMIUM = Path(os.environ.get("PFAR_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's own sandbox refuses to start
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # a container's /dev/shm is often 64 MiB: too small for a renderer's shared memory
    "--disable-dev-shm-usage",
]

# screenshots for the docs: written only on demand, so that a test run leaves docs/
# as it was (a PNG re-encoded by another Chromium or font differs in its bytes)
SCREENSHOTS_ENV = "PFAR_SCREENSHOTS"
CONSOLE_DOCS = ROOT / "docs" / "console"
_SHOT_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def unavailable() -> str | None:
    """Why no browser test can run here (None: they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (it is in the test extra: pip install -e '.[test]')"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium; set PFAR_TEST_CHROMIUM)"
    return None


def require_browser() -> None:
    """Skip the calling test where no browser can run (fail under CI=true)."""
    why = unavailable()
    if why is None:
        return
    if os.environ.get("CI") == "true":  # scripts/check.py installs Chromium where it can
        pytest.fail(f"{why} (CI=true: the browser tests must run)")
    pytest.skip(why)


def fresh_context(browser: Browser) -> BrowserContext:
    """A context of its own (cookies, storage, cache). Every page is laid out at one
    size, in one time zone and locale: what a test reads and what a screenshot shows
    are the same on every machine."""
    return browser.new_context(
        viewport={"width": 1280, "height": 800},
        device_scale_factor=1,
        locale="en-US",
        timezone_id="UTC",
        color_scheme="light",
    )


class _Server(uvicorn.Server):
    # a server in a thread installs no signal handlers (uvicorn leaves them to the main
    # thread); this also keeps it so if the tests ever run it on the main thread
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.contextmanager
def serving(app: ASGIApp) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (a free port) from a thread of its own; its base URL."""
    server = _Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            access_log=False,
            # an event stream a page left open does not hold the test's end up
            timeout_graceful_shutdown=2,
        )
    )
    thread = threading.Thread(target=server.run, name="browser-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AssertionError("the test's web server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def shoot(page: Page, name: str, folder: Path = CONSOLE_DOCS) -> Path | None:
    """Save the whole page as `<folder>/<name>.png` when PFAR_SCREENSHOTS=1 (the docs'
    screenshots, taken on demand: `PFAR_SCREENSHOTS=1 pytest tests/browser`); the
    file written, or None."""
    if _SHOT_NAME.fullmatch(name) is None:
        raise ValueError(f"screenshot name {name!r}: lower-case letters, digits and '-'")
    if os.environ.get(SCREENSHOTS_ENV) != "1":
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, animations="disabled", caret="hide")
    return path
