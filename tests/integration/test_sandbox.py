"""Sandboxes (R7) with real bubblewrap: a command sees the system read-only, writes only
its task's directory, has a private /tmp, its own pids and no network unless allowed;
a loop task's Bash runs in one; a sandbox whose task does not run on this kernel is
killed at start and within 30 s while it runs (its label, not memory, finds it)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.tools import sandbox
from pfar.tools.sandbox import Sandbox

from ..crash.test_regressions import boot_report, kernel
from ..support import make_home, wait_for

if not sandbox.available():
    if os.environ.get("CI") == "true":  # scripts/check.py installs it where it can
        raise RuntimeError("bubblewrap (bwrap) is not installed, and CI=true tests sandboxes")
    pytest.skip("bubblewrap (bwrap) is not installed", allow_module_level=True)


def _outside() -> Path:
    """A path the owner can write outside the task's directory and outside /tmp (which
    a sandbox replaces with its own)."""
    return Path.home() / f".pfar-sandbox-probe-{os.getpid()}-{time.monotonic_ns()}"


def _run(box: Sandbox, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        box.wrap(["/bin/bash", "-c", script]),
        env=box.env(dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_a_sandbox_writes_only_its_directory_and_sees_its_own_pids(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = _outside()
    box = Sandbox("h", "t", work)
    try:
        done = _run(box, f"echo in > {work}/in.txt; echo out > {outside}; echo $?")
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)
    assert (work / "in.txt").read_text() == "in\n"
    assert "Read-only file system" in done.stderr
    # a private /tmp: nothing written there shows outside
    _run(box, "echo t > /tmp/pfar-sandbox-probe")
    assert not Path("/tmp/pfar-sandbox-probe").exists()  # noqa: S108  (the host's /tmp)
    pids = _run(box, "ls /proc | grep -c '^[0-9]'")
    assert int(pids.stdout.strip()) < 10  # its own pid namespace: a handful of processes
    label = _run(box, "echo $PFAR_SANDBOX")
    assert label.stdout.strip() == "h:t"


def test_no_network_unless_allowed(tmp_path: Path) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    # the interpreter itself, not a venv's link to it: a venv under /tmp is hidden in there
    python = os.path.realpath(sys.executable)
    probe = (
        f'{python} -c "import urllib.request as u; '
        f"print(u.urlopen('http://127.0.0.1:{port}', timeout=3).read().decode())\""
    )
    try:
        closed = _run(Sandbox("h", "t", tmp_path), probe)
        opened = _run(Sandbox("h", "t", tmp_path, network=True), probe)
    finally:
        server.shutdown()
    assert closed.returncode != 0 and "ok" not in closed.stdout
    assert opened.returncode == 0 and opened.stdout.strip() == "ok"


def test_a_loop_tasks_commands_run_in_its_sandbox(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = _outside()

    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.role == "assistant" for m in request.messages):
            command = f"echo hi > inside.txt; echo no > {outside}"
            return reply(request, "", [ToolCall("b", "Bash", {"command": command})])
        return reply(request, "result: " + request.messages[-1].tool_results[0].content)

    async def main() -> str:
        home = make_home(
            tmp_path / "home",
            config='[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n[sandbox]\nenabled = true\n',
        )
        async with open_kernel(home, model=ScriptedChatModel(model)) as k:
            op = Operator(k)
            task = await op.start_loop("write two files", str(work))
            await op.wait_idle()
            turns = await op.journal.loops.turns(task.task_id)
            return json.dumps([str(t.turn) for t in turns])

    try:
        said = asyncio.run(main())
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)
    assert (work / "inside.txt").read_text() == "hi\n"
    assert "Read-only file system" in said


def _labelled(home_root: Path, task_id: str) -> subprocess.Popen[bytes]:
    """A process labelled as a sandbox of `task_id` in this home (as one left behind)."""
    env = {**os.environ, sandbox.LABEL: f"{sandbox.home_tag(home_root)}:{task_id}"}
    return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)


@pytest.mark.crash
def test_r7_a_sandbox_left_by_a_dead_kernel_is_killed_at_start_and_while_running(
    tmp_path: Path,
) -> None:
    home = make_home(
        tmp_path / "home", config="[sandbox]\nenabled = true\n", script='[[turns]]\ntext = "ok"\n'
    )
    before = _labelled(home.root, "from-an-earlier-boot")
    with kernel(home) as k:
        wait_for(lambda: before.poll() is not None, timeout=10, what="the orphan killed at start")
        assert "1 orphaned sandbox killed" in boot_report(home, k)
        later = _labelled(home.root, "not-running-here")  # e.g. left by a killed step
        start = time.monotonic()
        wait_for(lambda: later.poll() is not None, timeout=40, what="the 30 s reconciliation")
        assert time.monotonic() - start < 40
        other = subprocess.Popen(["sleep", "300"], start_new_session=True)  # not pfar's
        try:
            time.sleep(0.5)
            assert other.poll() is None  # only labelled processes are touched
        finally:
            other.kill()
            other.wait()
