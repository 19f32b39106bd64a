"""A flood of idle or slow connections does not stop the kernel (issue #22).

The kernel runs as `pfar run` with its open-file limit lowered to 256 (soft and hard,
so it cannot raise it), and 300 idle connections are opened to the webhook listener
or to the control socket: it refuses what is over its cap, goes on serving the CLI,
and its log stays small (it used to log every failed accept with a traceback, tens of
megabytes, and stop itself when a duty ran out of descriptors)."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from standardwebhooks import Webhook

from pfar.cli.client import call
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..support import make_home, pfar, said, task_states, wait_for

pytestmark = pytest.mark.crash  # kernels of their own, with a lowered descriptor limit

KEY = "whsec_" + base64.b64encode(b"k" * 32).decode()
FLOOD = 300
LOG_BOUND = 20_000  # bytes: a few lines, where the flood used to write megabytes
SCRIPT = """
[[responses]]
phase = "plan"
json = { steps = [] }

[[responses]]
phase = "synthesize"
text = "done"
"""
NOTE = """
id = "triage"
description = "Triage"
allowed_tools = []
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _home(tmp_path: Path, port: int, extra: str = "") -> Home:
    config = f"""
[channels]
directory = "{tmp_path}"
[channels.webhooks]
port = {port}
{extra}
[[channels.webhooks.routes]]
path = "/hooks/raw"
template = "triage"
secrets = ["hook_key"]
"""
    home = make_home(tmp_path / "home", config=config, templates={"triage": NOTE}, script=SCRIPT)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("hook_key", KEY)
    store.close()
    return home


class _Kernel:
    """`pfar run` with RLIMIT_NOFILE set to (soft, hard) before it starts."""

    def __init__(self, home: Home, soft: int, hard: int) -> None:
        self.home = home
        self.log = home.root / "kernel.out"
        env = {**os.environ, "PFAR_HOME": str(home.root)}
        env.pop("PFAR_FAULT", None)

        # the limit is set, then `pfar run` takes the process over (exec): its pid is ours
        limited = (
            "import os, resource, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard})); "
            "os.execv(sys.executable, [sys.executable, '-m', 'pfar', 'run', '--no-stdin'])"
        )
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", limited],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def serves(self) -> bool:
        try:
            call(self.home, {"op": "ping"}, timeout=2.0)
        except Exception:
            return False
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)


@contextmanager
def _kernel(home: Home, soft: int = 256, hard: int = 256) -> Iterator[_Kernel]:
    kernel = _Kernel(home, soft, hard)
    try:
        wait_for(kernel.serves, what="the kernel answering")
        yield kernel
    finally:
        kernel.stop()


@contextmanager
def _flood(connect: Callable[[], socket.socket]) -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    try:
        for _ in range(FLOOD):
            try:
                held.append(connect())
            except OSError:
                time.sleep(0.05)  # a full listen queue: the next one may get in
        yield held
    finally:
        for s in held:
            s.close()


def _signed(body: str, msg_id: str) -> dict[str, str]:
    at = datetime.now(UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(KEY).sign(msg_id, at, body),
    }


def _submits(home: Home) -> None:
    done = pfar(home, "submit", "triage", "after the flood", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_flooded_webhook_listener_leaves_the_kernel_serving(tmp_path: Path) -> None:
    port = _free_port()
    home = _home(tmp_path, port)
    with _kernel(home) as kernel:
        wait_for(lambda: _answers(port), what="the webhook listener")
        with _flood(lambda: socket.create_connection(("127.0.0.1", port), timeout=5)):
            time.sleep(1.5)  # the kernel meets the flood (asyncio retries accepts each 1 s)
            assert kernel.proc.poll() is None, kernel.log.read_text(errors="replace")[-2000:]
            _submits(home)  # the CLI is served meanwhile
        # the flood is gone: a signed event is a task again
        body = "the listener took a flood"
        wait_for(
            lambda: _post(port, body, "msg_after").status_code == 200,
            what="the listener taking events",
        )
        assert kernel.proc.poll() is None
    assert sorted(task_states(home).values()) == ["Completed", "Completed"]
    assert kernel.log.stat().st_size < LOG_BOUND, kernel.log.read_text(errors="replace")[:3000]


def test_a_flooded_control_socket_leaves_the_kernel_running(tmp_path: Path) -> None:
    home = _home(tmp_path, _free_port())

    def connect() -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(str(home.control_socket))
        return s

    with _kernel(home) as kernel:
        with _flood(connect) as held:
            time.sleep(1.5)
            assert kernel.proc.poll() is None, kernel.log.read_text(errors="replace")[-2000:]
            # over the cap a connection is told so and closed at once
            refused = [s for s in held[-20:] if _said_busy(s)]
            assert refused, "no connection over the cap was refused"
            # the owner's CLI is told why, not of a broken pipe
            busy = pfar(home, "cancel", "abcd1234")
            assert "too many connections to the kernel; try again" in said(busy), said(busy)
        wait_for(kernel.serves, what="the kernel serving after the flood")
        _submits(home)
        # a connection that sends no request is closed by the kernel (after 10 s)
        idle = connect()
        idle.settimeout(60)
        assert idle.recv(100) == b""
        idle.close()
        assert kernel.proc.poll() is None
    text = kernel.log.read_text(errors="replace")
    assert kernel.log.stat().st_size < LOG_BOUND, text[:3000]
    assert "connections open; refusing more" in text


def test_a_slow_request_is_cut_off_and_the_limit_is_raised(tmp_path: Path) -> None:
    port = _free_port()
    home = _home(tmp_path, port, "request_timeout_seconds = 1")
    with _kernel(home, soft=256, hard=4096) as kernel:
        limits = Path(f"/proc/{kernel.proc.pid}/limits").read_text()
        files = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        assert files.split()[3] == "4096", files  # the soft limit, raised to the hard one
        wait_for(lambda: _answers(port), what="the webhook listener")
        slow = socket.create_connection(("127.0.0.1", port), timeout=30)
        slow.sendall(b"POST /hooks/raw HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        assert slow.recv(100) == b""  # the listener hung up on it
        slow.close()
        body_slow = socket.create_connection(("127.0.0.1", port), timeout=30)
        body_slow.sendall(b"POST /hooks/raw HTTP/1.1\r\nHost: x\r\ncontent-length: 100\r\n\r\nabc")
        assert body_slow.recv(100) == b""
        body_slow.close()
        assert kernel.proc.poll() is None
        answer = _post(port, "in time", "msg_1")
        assert answer.status_code == 200, answer.text


def _post(port: int, body: str, msg_id: str) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}/hooks/raw", content=body, headers=_signed(body, msg_id)
    )


def _answers(port: int) -> bool:
    try:
        return httpx.post(f"http://127.0.0.1:{port}/hooks/raw", content="x").status_code > 0
    except httpx.HTTPError:
        return False


def _said_busy(s: socket.socket) -> bool:
    try:
        return b'"code": "busy"' in s.recv(1000)
    except OSError:
        return False
