"""Bash with real processes and WebFetch against a real loopback HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pfar.errors import ToolFailed
from pfar.tools.coding import Bash, WebFetch
from pfar.tools.coding.text import MAX_CHARS
from pfar.tools.hosts import HostPolicy
from pfar.tools.processes import kill_group, start_time

from ..coding_support import call, context


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """The process has ended (and been reaped, or is a zombie waiting to be)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if start_time(pid) is None or _state(pid) == "Z":
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


# -- Bash -----------------------------------------------------------------------


def test_bash_runs_in_the_working_directory_with_output_combined(work: Path) -> None:
    (work / "here.txt").write_text("x")
    command = "ls; echo out; echo err >&2; echo $PFAR_TASK_ID $PFAR_STEP; cat; pwd"
    out = call(Bash(), {"command": command, "description": "look around"}, context(work, step=4))
    assert out["text"] == f"here.txt\nout\nerr\ntask1 4\n{work}\n"
    assert out["exit_code"] == 0


def test_a_failing_command_is_a_result_with_its_exit_code(work: Path) -> None:
    out = call(Bash(), {"command": "echo trying; exit 3"}, context(work))
    assert out["exit_code"] == 3
    assert out["text"] == "trying\n\n[exit code 3]"
    quiet = call(Bash(), {"command": "false"}, context(work))
    assert quiet["text"] == "(no output)\n\n[exit code 1]"


def test_bash_journals_its_pid_before_waiting(work: Path) -> None:
    seen: list[int] = []

    async def started(pid: int) -> None:
        seen.append(pid)

    out = call(Bash(), {"command": "echo $$"}, context(work, started=started))
    assert seen == [int(out["text"])]


def test_a_timeout_kills_the_whole_process_group(work: Path) -> None:
    command = "sleep 300 & echo $! > child.pid; echo waiting; sleep 300"
    started = time.monotonic()
    with pytest.raises(ToolFailed, match=r"timed out after 1s and was killed") as info:
        call(Bash(), {"command": command, "timeout": 1}, context(work))
    assert time.monotonic() - started < 30
    assert "Its output so far:\nwaiting" in str(info.value)
    child = int((work / "child.pid").read_text())
    assert _gone(child), f"the background sleep {child} outlived the timeout"


def test_cancelling_a_call_kills_its_process_group(work: Path) -> None:
    async def go() -> None:
        ctx = context(work)
        command = "sleep 300 & echo $! > child.pid; sleep 300"
        run = asyncio.ensure_future(Bash().run({"command": command}, ctx))
        for _ in range(1000):
            if (work / "child.pid").exists() and (work / "child.pid").read_text():
                break
            await asyncio.sleep(0.01)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(go())
    child = int((work / "child.pid").read_text())
    assert _gone(child), f"the background sleep {child} outlived the cancellation"


def test_a_background_process_does_not_hold_the_call(work: Path) -> None:
    started = time.monotonic()
    out = call(Bash(), {"command": "sleep 60 & echo $! > bg.pid; echo done"}, context(work))
    child = int((work / "bg.pid").read_text())
    try:
        assert out["text"] == "done\n"
        assert time.monotonic() - started < 20
    finally:
        kill_group(child)  # in case it leads a group of its own
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_long_output_keeps_its_head_and_tail(work: Path) -> None:
    out = call(Bash(), {"command": "seq 1 40000"}, context(work))
    text = out["text"]
    assert len(text) <= MAX_CHARS + 200
    assert text.startswith("1\n2\n3\n")
    assert text.endswith("39999\n40000\n")
    total = sum(len(f"{i}\n") for i in range(1, 40001))
    assert out["cut_chars"] == total - MAX_CHARS
    assert f"[... {total - MAX_CHARS:,} characters cut here; redirect the output" in text


def test_bash_timeout_is_bounded() -> None:
    with pytest.raises(ToolFailed, match=r"args\.timeout"):
        Bash().validate({"command": "true", "timeout": 601})
    with pytest.raises(ToolFailed, match=r"args\.timeout"):
        Bash().validate({"command": "true", "timeout": 0})


# -- WebFetch -------------------------------------------------------------------

# the site is on loopback, which WebFetch reaches only when allowed
LOOPBACK = HostPolicy.of([], ["127.0.0.1"])

PAGE = """<!doctype html><html><head><title>The Page</title>
<style>body { color: red }</style><script>stealCookies()</script></head>
<body><h2>Install</h2><p>Run <code>pip install pfar</code>, then read
<a href="/docs">the docs</a>.</p><ul><li>fast</li><li>durable</li></ul></body></html>"""


class Site:
    """A loopback web site: a page, plain text, a redirect, a 404, an image."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                site.paths.append(self.path)
                if self.path == "/page":
                    self._send(200, "text/html; charset=utf-8", PAGE.encode())
                elif self.path == "/plain":
                    self._send(200, "text/plain", b"just text\n")
                elif self.path == "/moved":
                    self.send_response(302)
                    self.send_header("Location", "/page")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/image":
                    self._send(200, "image/png", b"\x89PNG\r\n\x1a\n\0\0")
                elif self.path == "/huge":
                    self._send(200, "text/plain", b"a" * (6 * 1024 * 1024))
                else:
                    self._send(404, "text/html", b"<h1>Not Found</h1>")

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def test_webfetch_turns_html_into_markdown(site: Site, work: Path) -> None:
    out = call(WebFetch(), {"url": site.url("/page")}, context(work, hosts=LOOPBACK))
    text = out["text"]
    assert text.startswith("# The Page\n\n## Install\n")
    assert "Run `pip install pfar`, then read\n[the docs](/docs)." in text
    assert "- fast\n- durable" in text
    assert "stealCookies" not in text and "color: red" not in text
    assert out["content_type"] == "text/html" and out["summarized"] is False


def test_webfetch_follows_redirects_and_reads_plain_text(site: Site, work: Path) -> None:
    moved = call(WebFetch(), {"url": site.url("/moved")}, context(work, hosts=LOOPBACK))
    assert moved["text"].startswith(f"[Redirected to {site.url('/page')}]\n# The Page")
    assert site.paths == ["/moved", "/page"]
    plain = call(WebFetch(), {"url": site.url("/plain")}, context(work, hosts=LOOPBACK))
    assert plain["text"] == "just text\n"


def test_webfetch_errors_name_the_status_or_the_problem(site: Site, work: Path) -> None:
    with pytest.raises(ToolFailed, match=r"/missing answered HTTP 404 Not Found"):
        call(WebFetch(), {"url": site.url("/missing")}, context(work, hosts=LOOPBACK))
    with pytest.raises(ToolFailed, match="image/png, not a text or HTML page"):
        call(WebFetch(), {"url": site.url("/image")}, context(work, hosts=LOOPBACK))
    with pytest.raises(ToolFailed, match="not an http:// or https:// URL"):
        call(WebFetch(), {"url": "file:///etc/passwd"}, context(work, hosts=LOOPBACK))
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(ToolFailed, match="cannot fetch"):
        call(WebFetch(), {"url": f"http://127.0.0.1:{port}/page"}, context(work, hosts=LOOPBACK))


def test_webfetch_caps_what_it_reads_and_shows(site: Site, work: Path) -> None:
    out = call(WebFetch(), {"url": site.url("/huge")}, context(work, hosts=LOOPBACK))
    assert out["bytes"] == 5 * 1024 * 1024
    assert "only its start was read" in out["text"]
    assert len(out["text"]) < MAX_CHARS + 500
    assert "more characters not shown" in out["text"]


def test_webfetch_with_a_prompt_returns_the_summary(site: Site, work: Path) -> None:
    asked: list[tuple[str, str]] = []

    async def summarize(content: str, prompt: str) -> str:
        asked.append((content, prompt))
        return "It installs with pip."

    args = {"url": site.url("/page"), "prompt": "How do I install it?"}
    out = call(WebFetch(), args, context(work, summarize=summarize, hosts=LOOPBACK))
    assert out["text"] == "It installs with pip." and out["summarized"] is True
    ((content, prompt),) = asked
    assert prompt == "How do I install it?"
    assert content.startswith("# The Page") and "`pip install pfar`" in content
    # no summarizing model: the page itself
    plain = call(WebFetch(), args, context(work, hosts=LOOPBACK))
    assert plain["text"].startswith("# The Page") and plain["summarized"] is False
