"""The vendored front-end libraries work in a real browser, served the way the console
serves them: a Starlette app on uvicorn with the console's static folder mounted. htmx
loads and swaps a fragment on a click, its SSE extension swaps in what an event stream
sends, and uPlot draws a chart on a canvas. The console's own tests follow this
pattern (tests/browser/browser_support.py)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .browser_support import SCREENSHOTS_ENV, STATIC, serving, shoot

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

README = (STATIC / "vendor" / "README.md").read_text()
ASSETS = [
    "vendor/uplot/uPlot.min.css",
    "vendor/htmx/htmx.min.js",
    "vendor/htmx-ext-sse/sse.min.js",
    "vendor/uplot/uPlot.iife.min.js",
]
TICKS = 3

PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>pfar vendored assets</title>
<link rel="stylesheet" href="/static/{ASSETS[0]}">
{"".join(f'<script src="/static/{a}"></script>' for a in ASSETS[1:])}
</head>
<body>
<button id="load" hx-get="/fragment" hx-target="#target">load</button>
<div id="target">not loaded</div>
<div hx-ext="sse" sse-connect="/events"><p id="ticks" sse-swap="tick">no tick yet</p></div>
<div id="chart"></div>
<script>
new uPlot(
  {{width: 400, height: 200, series: [{{}}, {{label: "tasks", stroke: "blue", width: 2}}]}},
  [[1700000000, 1700000060, 1700000120], [3, 1, 2]],
  document.getElementById("chart"),
);
</script>
</body>
</html>
"""


async def index(request: Request) -> HTMLResponse:
    return HTMLResponse(PAGE)


async def fragment(request: Request) -> HTMLResponse:
    return HTMLResponse('<span id="swapped">swapped in by htmx</span>')


async def events(request: Request) -> StreamingResponse:
    async def stream() -> AsyncIterator[str]:
        for n in range(1, TICKS + 1):
            yield f"event: tick\ndata: <span>tick {n}</span>\n\n"
            await asyncio.sleep(0.05)
        # kept open (a closed stream is reconnected to, and would count again from 1);
        # Starlette ends it when the page goes away
        while True:
            yield ": still here\n\n"
            await asyncio.sleep(1)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
    )


@pytest.fixture
def site() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/", index),
            Route("/fragment", fragment),
            Route("/events", events),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )
    with serving(app) as url:
        yield url


def test_htmx_sse_and_uplot_work_in_the_browser(site: str, browser_page: Page) -> None:
    from playwright.sync_api import expect

    page = browser_page
    answered: dict[str, int] = {}
    page.on("response", lambda r: answered.__setitem__(r.url.removeprefix(site), r.status))
    page.goto(site)

    assert {f"/static/{a}": 200 for a in ASSETS}.items() <= answered.items()
    htmx_version = page.evaluate("typeof htmx === 'object' ? htmx.version : typeof htmx")
    vendored = re.search(r"^\| `htmx/htmx\.min\.js` \|[^|]+\| ([^ |]+) \|", README, re.M)
    assert vendored is not None
    assert htmx_version == vendored[1], "the page did not load the vendored htmx"
    assert page.evaluate("typeof uPlot") == "function"

    page.click("#load")
    expect(page.locator("#target #swapped")).to_have_text("swapped in by htmx")

    expect(page.locator("#ticks")).to_have_text(f"tick {TICKS}")

    canvas = page.locator("#chart canvas")
    expect(canvas).to_have_count(1)
    drawn = page.evaluate(
        """() => {
            const c = document.querySelector("#chart canvas");
            const pixels = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            return pixels.some((v) => v !== 0);
        }"""
    )
    assert drawn, "uPlot made a canvas but drew nothing on it"
    expect(page.locator("#chart .u-legend")).to_contain_text("tasks")


def test_screenshots_are_taken_only_on_demand(
    site: str, browser_page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = browser_page
    page.goto(site)
    monkeypatch.delenv(SCREENSHOTS_ENV, raising=False)
    assert shoot(page, "smoke", folder=tmp_path) is None
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setenv(SCREENSHOTS_ENV, "1")
    shot = shoot(page, "smoke", folder=tmp_path / "console")
    assert shot == tmp_path / "console" / "smoke.png"
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(ValueError, match="screenshot name"):
        shoot(page, "../smoke", folder=tmp_path)
