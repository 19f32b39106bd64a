"""Where a loop's WebFetch may go, through a real kernel: a host is judged by the
addresses it resolves to, however it is spelled, and every redirect hop is judged
again (the policy, the owner's standing answers, the unusual-host warning)."""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pfar.vault.home import Home

from ..crash.test_regressions import kernel, rows, wait_state
from ..support import RecordingServer, make_home


class Redirector:
    """A loopback site: `/go/URL` redirects to URL, `/page` is a page."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.paths.append(self.path)
                if self.path.startswith("/go/"):
                    self.send_response(302)
                    self.send_header("Location", self.path[len("/go/") :])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"<html><body><p>the page</p></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def site() -> Iterator[Redirector]:
    s = Redirector()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.fixture
def other() -> Iterator[RecordingServer]:
    s = RecordingServer()
    yield s
    s.close()


def _fetches(tmp_path: Path, urls: list[str], policy: str = "") -> tuple[Home, list[Any]]:
    """A loop task whose model fetches each of `urls` (WebFetch always allowed): its
    tool calls' rows once it waits for the owner."""
    calls = ", ".join(f'{{ name = "WebFetch", input = {{ url = {json.dumps(u)} }} }}' for u in urls)
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        tool_calls = [ {calls} ]

        [[turns]]
        text = "done"
        """
    )
    config = f'[loop]\ntools = ["WebFetch"]\nalways_allow = ["WebFetch"]\n{policy}'
    home = make_home(tmp_path / "home", script=script, config=config)
    work = tmp_path / "work"
    work.mkdir()
    with kernel(home) as k:
        tid = k.request("loop", prompt="fetch", directory=str(work))["task_id"]
        wait_state(home, tid, "WaitingForUser")
        k.terminate()
    steps = rows(
        home, "SELECT step, status, error FROM task_steps WHERE task_id = ? ORDER BY step", tid
    )
    return home, steps


def test_every_spelling_of_loopback_and_the_metadata_address_is_refused(
    tmp_path: Path, other: RecordingServer
) -> None:
    port = other.url.rsplit(":", 1)[1]
    hosts = ["127.1", "2130706433", "0x7f000001", "0.0.0.0", "[::ffff:127.0.0.1]", "localhost"]
    urls = [f"http://{h}:{port}/x" for h in hosts]
    urls.append("http://169.254.169.254/latest/meta-data/")
    _, steps = _fetches(tmp_path, urls)
    assert [s["status"] for s in steps] == ["failed"] * len(urls)
    for step, url in zip(steps, urls, strict=True):
        assert "Blocked by security policy" in step["error"], (url, step["error"])
        assert "allowed_private_hosts" in step["error"]
    assert "link-local address" in steps[-1]["error"]
    assert other.requests == []  # nothing reached the machine's own server


def test_a_redirect_to_a_host_not_allowed_is_refused_at_the_hop(
    tmp_path: Path, site: Redirector, other: RecordingServer
) -> None:
    start = f"http://127.0.0.1:{site.port}/go/"
    urls = [
        start + f"{other.url}/secret",  # loopback, another port: not allowed
        start + f"http://127.1:{other.url.rsplit(':', 1)[1]}/secret",
        start + "http://169.254.169.254/latest/meta-data/",
        f"http://127.0.0.1:{site.port}/page",  # allowed: fetched
    ]
    policy = f'[loop.policy]\nallowed_private_hosts = ["127.0.0.1:{site.port}"]\n'
    _, steps = _fetches(tmp_path, urls, policy)
    assert [s["status"] for s in steps] == ["failed", "failed", "failed", "completed"]
    for step in steps[:3]:
        assert "redirects to http" in step["error"], step["error"]
        assert "Blocked by security policy" in step["error"]
    assert "link-local address" in steps[2]["error"]
    assert other.requests == []  # the hop was refused before it was made
    assert site.paths.count("/page") == 1


def test_a_redirect_to_a_blocked_host_name_is_refused(tmp_path: Path, site: Redirector) -> None:
    urls = [f"http://127.0.0.1:{site.port}/go/http://Localhost.:{site.port}/page"]
    policy = (
        '[loop.policy]\nblocked_hosts = ["localhost"]\n'
        'allowed_private_hosts = ["127.0.0.1", "localhost"]\n'
    )
    _, steps = _fetches(tmp_path, urls, policy)
    (step,) = steps
    assert step["status"] == "failed"
    assert "the host localhost is blocked" in step["error"], step["error"]
    assert site.paths == [f"/go/http://Localhost.:{site.port}/page"]


def test_the_new_host_warning_names_the_redirects_host(tmp_path: Path, site: Redirector) -> None:
    urls = [f"http://127.0.0.1:{site.port}/go/http://localhost:{site.port}/page"]
    policy = '[loop.policy]\nallowed_private_hosts = ["127.0.0.1", "localhost"]\n'
    home, steps = _fetches(tmp_path, urls, policy)
    assert [s["status"] for s in steps] == ["completed"]
    warnings = [
        r["body"]
        for r in rows(home, "SELECT body FROM owner_outbox WHERE message_key LIKE 'anomaly:%'")
    ]
    assert len(warnings) == 2, warnings
    assert any("127.0.0.1 is a host no task has reached before" in w for w in warnings)
    assert any(
        f"localhost (a redirect to http://localhost:{site.port}/page) is a host no task "
        "has reached before" in w
        for w in warnings
    ), warnings
    seen = {r["host"] for r in rows(home, "SELECT host FROM seen_hosts")}
    assert seen == {"127.0.0.1", "localhost"}
