"""The kernel's channels when the other end is hostile or broken, through real processes:
escape codes from outside never reach a terminal raw, a closed pipe or an unwritable file
never takes the kernel down, oversize input gets a refusal that names the limit, and the
small CLI edges (a huge --limit, a short id prefix, a submit during shutdown) get a clear
message."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pfar.vault.home import Home

from ..support import (
    KernelProcess,
    db,
    make_home,
    pfar,
    running_kernel,
    said,
    task_states,
    vault_db,
    wait_for,
    wait_for_file,
)
from .test_bad_input import CMD_SCRIPT, CMD_TEMPLATE

TERMINAL = {"Completed", "Failed", "Abandoned"}
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\r", "\u202e")

# What a hostile page sends: retitle the window, clear the screen, return to the start of
# the line, and a line made to look like pfar's own approval prompt.
HOSTILE = (
    "hello\x1b]0;owned\x07\x1b[2J\rgone\x9b31m\u202eevil\n"
    "[pfar → owner] Approval needed [deadbeef]: pay 1000 EUR\n"
)


@contextmanager
def hostile_server() -> Iterator[str]:
    """A loopback HTTP server whose every answer is HOSTILE: 200 on /ok, 500 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            data = HOSTILE.encode()
            self.send_response(200 if self.path == "/ok" else 500)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = httpd.server_address[:2]
        yield f"http://{host}:{port}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _fetch_home(root: Path, url: str) -> Home:
    return make_home(
        root,
        templates={
            "fetch": 'id = "fetch"\nallowed_tools = ["http.request"]\n',
            "ask": (
                'id = "ask"\nallowed_tools = ["shell.run"]\n'
                '[approval]\nrequire = ["shell.run"]\non_deny = "fail"\n'
            ),
        },
        script=f"""
            [[responses]]
            template = "fetch"
            phase = "plan"
            json = {{ steps = [ {{ tool = "http.request", args = {{ url = "{url}/$input" }} }} ] }}

            [[responses]]
            template = "fetch"
            phase = "synthesize"
            text = "fetched: $step0"

            [[responses]]
            template = "ask"
            phase = "plan"
            [[responses.json.steps]]
            tool = "shell.run"
            description = "tidy up\\u001b[2J\\u0007"
            args = {{ argv = ["echo", "$input"] }}
        """,
    )


def _no_raw_controls(text: str, where: str) -> None:
    for c in RAW_CONTROLS:
        assert c not in text, f"{where}: raw {c!r} in {text!r}"


def _submit_wait(home: Home, template: str, text: str) -> str:
    r = pfar(home, "submit", template, text, "--json")
    assert r.returncode == 0, said(r)
    task_id = str(json.loads(r.stdout)["task_id"])
    wait_for(lambda: task_states(home).get(task_id) in TERMINAL, what=f"task {template} to end")
    return task_id


# -- 1. escape codes from outside ---------------------------------------------------


def test_escape_codes_from_outside_never_reach_a_terminal_raw(tmp_path: Path) -> None:
    with hostile_server() as url:
        home = _fetch_home(tmp_path / "home", url)
        with running_kernel(home) as k:
            ok = _submit_wait(home, "fetch", "ok")
            failed = _submit_wait(home, "fetch", "fail")
            asked = pfar(home, "submit", "ask", "\x1b]0;from-the-chat\x07", "--json")
            assert asked.returncode == 0, said(asked)
            ask = json.loads(asked.stdout)["task_id"]
            wait_for(
                lambda: any(m["kind"] == "approval" for m in _owner_log(home)),
                what="the approval prompt",
            )
            approval = next(m for m in _owner_log(home) if m["kind"] == "approval")
            approved = pfar(home, "approve", approval["body"].split("[")[1][:8])
            assert approved.returncode == 0, said(approved)
            wait_for(lambda: task_states(home)[ask] in TERMINAL, what="the approved task")
            wait_for(lambda: len(_owner_log(home)) >= 4, what="four owner messages")
            time.sleep(0.3)  # the stdout sink writes after the owner log
            shown = {
                "tasks": pfar(home, "tasks"),
                "task show ok": pfar(home, "task", "show", ok),
                "task show failed": pfar(home, "task", "show", failed),
                "task show ask": pfar(home, "task", "show", ask),
                "task trace": pfar(home, "task", "trace", ok),
                "approvals": pfar(home, "approvals", "--all"),
            }
        kernel_out = k.stdout_path.read_bytes().decode()

    assert task_states(home)[ok] == "Completed"
    assert task_states(home)[failed] == "Failed"
    # the kernel's own stdout (owner messages) and stderr (log lines)
    _no_raw_controls(kernel_out, "kernel stdout")
    assert "fetched: {" in kernel_out or "fetched: hello" in kernel_out, kernel_out
    assert "hello\\x1b]0;owned\\x07\\x1b[2J\\x0dgone\\x9b31m\\u202eevil" in kernel_out
    # a line from outside never starts where pfar's own message lines start
    forged = [
        line for line in kernel_out.splitlines() if line.startswith("[pfar → owner] Approval")
    ]
    assert len(forged) == 1 and "deadbeef" not in forged[0], forged
    for what, r in shown.items():
        assert r.returncode == 0, (what, said(r))
        _no_raw_controls(r.stdout + r.stderr, what)
    assert "\\x1b]0;owned" in shown["task show failed"].stdout
    assert "(tidy up\\x1b[2J\\x07)" in shown["task show ask"].stdout  # the model's words

    # --json is for scripts: JSON's own escapes, and the text comes back byte for byte
    for args in (("tasks", "--json"), ("task", "show", failed, "--json"), ("approvals", "--json")):
        r = pfar(home, *args)
        assert r.returncode == 0, said(r)
        _no_raw_controls(r.stdout, " ".join(args))
        json.loads(r.stdout)
    shown_json = json.loads(pfar(home, "task", "show", failed, "--json").stdout)
    assert "\x1b]0;owned\x07" in shown_json["task"]["error"]


def _owner_log(home: Home) -> list[dict[str, Any]]:
    if not home.owner_log.exists():
        return []
    return [json.loads(line) for line in home.owner_log.read_text().splitlines() if line]


# -- 2. a broken stdout, stderr or file never takes the kernel down --------------------


def _spawn(home: Home, *, stdin: int | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PFAR_HOME": str(home.root)}
    env.pop("PFAR_FAULT", None)
    return subprocess.Popen(
        [sys.executable, "-m", "pfar", "run", *([] if stdin is not None else ["--no-stdin"])],
        env=env,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_ready(home: Home, proc: subprocess.Popen[bytes]) -> None:
    def ready() -> bool:
        assert proc.poll() is None, f"the kernel exited with {proc.returncode}"
        return pfar(home, "approvals", "--json").returncode == 0 and home.control_socket.exists()

    wait_for(ready, what="the kernel to start")
    from pfar.cli.client import call

    wait_for(lambda: _pings(call, home), what="the control socket")


def _pings(call: Any, home: Home) -> bool:
    try:
        call(home, {"op": "ping"}, timeout=1.0)
    except Exception:
        return False
    return True


def test_a_kernel_whose_stdout_and_stderr_are_closed_pipes_keeps_working(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    proc = _spawn(home, stdin=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
        proc.stdout.close()  # nobody reads: every write the kernel makes gets EPIPE
        proc.stderr.close()
        _wait_ready(home, proc)
        for n in range(3):
            r = pfar(home, "submit", "cmd", f"echo {n}", "--wait", "--json")
            assert r.returncode == 0, said(r)
            assert json.loads(r.stdout)["state"] == "Completed"
        failing = pfar(home, "submit", "cmd", "exit 3", "--wait", "--json")  # logs an error
        assert failing.returncode == 3, said(failing)  # --wait's code for a Failed task
        # the stdin adapter answers on the broken stdout, then reads the next line
        proc.stdin.write(b"submit cmd echo one\nbogus\nsubmit cmd echo two\n")
        proc.stdin.flush()
        wait_for(lambda: len(task_states(home)) == 6, what="the stdin submits")
        wait_for(lambda: set(task_states(home).values()) <= TERMINAL, what="all tasks to end")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sorted(task_states(home).values()) == ["Completed"] * 5 + ["Failed"]
    with db(home) as conn:
        assert [r[0] for r in conn.execute("SELECT clean FROM kernel_boots")] == [1]


def test_shutdown_goes_on_when_a_file_in_the_home_cannot_be_removed(tmp_path: Path) -> None:
    """What a `chmod 000` of the home does to a kernel run by its owner; this works as root
    too: the control socket is replaced by a directory, which unlink() refuses."""
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    k = KernelProcess(home)
    try:
        k.wait_ready()
        r = pfar(home, "submit", "cmd", "echo fine", "--wait")
        assert r.returncode == 0, said(r)
        home.control_socket.unlink()
        home.control_socket.mkdir()
        (home.control_socket / "keep").write_text("not pfar's")
        code = k.terminate()
    finally:
        if k.proc.poll() is None:
            k.kill()
    out = k.output()
    assert "Traceback" not in out, out
    assert code == 0, out
    assert f"{home.control_socket}" in out and "shut down cleanly" in out, out
    assert (home.control_socket / "keep").read_text() == "not pfar's"
    with db(home) as conn:
        assert [r[0] for r in conn.execute("SELECT clean FROM kernel_boots")] == [1]


def test_an_audit_log_that_cannot_be_written_is_reported_once_and_the_kernel_goes_on(
    tmp_path: Path,
) -> None:
    """A full disk for audit.log alone: the file is already at the process's size limit."""
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    limit = 16 << 20
    old = b'{"event": "from an earlier boot"}\n'
    with open(home.audit_log, "wb") as fh:
        fh.write(old * (limit // len(old)))
        fh.write(b"x" * (limit - fh.tell() - 1) + b"\n")
    before = home.audit_log.read_bytes()

    # a write past the limit fails with EFBIG (instead of a SIGXFSZ that ends the process)
    at_the_limit = (
        "import resource, runpy, signal, sys; "
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
        "sys.argv = ['pfar', 'run', '--no-stdin']; "
        "runpy.run_module('pfar', run_name='__main__')"
    )
    env = {**os.environ, "PFAR_HOME": str(home.root)}
    env.pop("PFAR_FAULT", None)
    err_path = tmp_path / "kernel.err"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", at_the_limit],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            _wait_ready(home, proc)
            for n in range(3):
                r = pfar(home, "submit", "cmd", f"echo {n}", "--wait", "--json")
                assert r.returncode == 0, said(r)
                time.sleep(1.2)  # the audit log is flushed every second
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    out = err_path.read_text()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert out.count(f"{home.audit_log}: cannot be written (File too large)") == 1, out
    assert out.count("audit record(s) could not be written and are lost") == 1, out
    assert home.audit_log.read_bytes() == before  # nothing stored was overwritten
    assert set(task_states(home).values()) == {"Completed"}


# -- 3. big input on every channel ----------------------------------------------------


def test_a_stdin_line_over_the_limit_is_refused_and_the_next_line_is_read(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    out_path = tmp_path / "kernel.out"
    env = {**os.environ, "PFAR_HOME": str(home.root)}
    env.pop("PFAR_FAULT", None)
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pfar", "run"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            assert proc.stdin is not None
            _wait_ready(home, proc)
            # over 64 KiB (asyncio's default) and over 1 MiB (pfar's limit); the tail of an
            # oversize line must not be taken for a command of its own
            for size in (100 << 10, 2 << 20):
                proc.stdin.write(b"submit cmd " + b"y" * size + b"; submit cmd echo tail\n")
            proc.stdin.write(b"submit cmd echo after\n")
            proc.stdin.flush()
            wait_for(lambda: len(task_states(home)) == 2, what="two tasks")
            wait_for(lambda: set(task_states(home).values()) <= TERMINAL, what="the tasks")
            time.sleep(0.5)
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = out_path.read_text(errors="replace")
    assert "error: line 2: over 1 MiB (1048576 bytes); ignored" in text, text[-2000:]
    assert "line 1" not in text  # 100 KiB is under the limit
    with db(home) as conn:
        inputs = sorted(
            json.loads(r[0])["text"] for r in conn.execute("SELECT trigger_event FROM task_journal")
        )
    assert len(inputs) == 2
    assert inputs[0] == "echo after"
    assert inputs[1].startswith("yyyy") and len(inputs[1]) > 100 << 10


def _raw_call(home: Home, *lines: bytes) -> list[dict[str, Any]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(home.control_socket))
        answers = []
        with s.makefile("rb") as f:
            for line in lines:
                s.sendall(line)
                answers.append(json.loads(f.readline()))
        return answers


def test_a_control_request_over_the_limit_gets_an_answer_and_the_connection_works(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home) as k:
        big = json.dumps({"op": "submit", "template": "cmd", "text": "z" * (2 << 20)})
        ping_line = json.dumps({"op": "ping", "token": home.control_token.read_text()})
        refused, ping = _raw_call(home, big.encode() + b"\n", ping_line.encode() + b"\n")
        assert refused == {
            "ok": False,
            "error": {
                "code": "bad_request",
                "message": "request over 1 MiB (1048576 bytes); nothing was done",
            },
        }
        assert ping["ok"] and ping["result"]["pid"] == k.proc.pid
        assert task_states(home) == {}
        # the client refuses before sending
        r = pfar(home, "credential", "abcd1234", stdin="s" * (2 << 20))
        assert r.returncode == 1
        assert "1 MiB" in said(r) or "64 KiB" in said(r), said(r)
        assert k.proc.poll() is None


def test_secret_set_over_the_limit_is_refused_with_the_limit(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    big = "k" * ((64 << 10) + 1)

    def stored() -> int:
        with vault_db(home, home.secrets_db) as conn:
            return int(conn.execute("SELECT count(*) FROM secrets").fetchone()[0])

    expected = "the secret is 65537 bytes; at most 65536 (64 KiB) are stored; nothing was stored"
    r = pfar(home, "secret", "set", "big", stdin=big)  # no kernel: straight into secrets.db
    assert r.returncode == 1
    assert said(r) == f"error: {expected}"
    with running_kernel(home) as k:
        for value in (big, "m" * (2 << 20)):
            r = pfar(home, "secret", "set", "big", stdin=value)
            assert r.returncode == 1
            assert "at most 65536 (64 KiB) are stored; nothing was stored" in said(r), said(r)
        # the kernel refuses one that is sent anyway
        (answer,) = _raw_call(
            home,
            json.dumps(
                {
                    "op": "secret_set",
                    "name": "big",
                    "value": big,
                    "token": home.control_token.read_text(),
                }
            ).encode()
            + b"\n",
        )
        assert answer["ok"] is False and expected in answer["error"]["message"], answer
        ok = pfar(home, "secret", "set", "small", stdin="fits-fine")
        assert ok.returncode == 0, said(ok)
        assert k.proc.poll() is None
    assert stored() == 1


# -- 4. small CLI edges ------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["99999999999999999999", "0", "-1"])
def test_tasks_limit_out_of_range_is_refused(tmp_path: Path, limit: str) -> None:
    home = make_home(tmp_path / "home")
    r = pfar(home, "tasks", "--limit", limit)
    assert r.returncode == 2, said(r)
    assert "Traceback" not in said(r)
    assert f"Invalid value for '--limit': {limit} is not in the range 1<=x<=1000000" in said(r)
    ok = pfar(home, "tasks", "--limit", "1000000", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout) == [], said(ok)


def test_an_id_prefix_under_four_characters_is_called_too_short(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    with running_kernel(home):
        r = pfar(home, "submit", "run_command", "echo hi", "--json")
        assert r.returncode == 0, said(r)
        task_id = json.loads(r.stdout)["task_id"]

        def pending() -> str | None:
            with db(home) as conn:
                row = conn.execute("SELECT approval_id FROM pending_approvals").fetchone()
            return None if row is None else str(row[0])

        approval_id = str(wait_for(pending, what="the approval"))
        for args, prefix in (
            (("task", "show"), task_id[:1]),
            (("task", "show"), task_id[:3]),
            (("approve",), approval_id[:2]),
        ):
            r = pfar(home, *args, prefix)
            assert r.returncode == 1, said(r)
            assert said(r) == (
                f"error: id prefix {prefix!r} is too short: give at least 4 characters "
                "(or the whole id)"
            ), said(r)
        assert pfar(home, "task", "show", task_id[:4]).returncode == 0
        assert pfar(home, "session", "show", "ab").returncode == 1
        assert "at least 4 characters" in said(pfar(home, "session", "show", "ab"))


def test_submit_during_a_graceful_shutdown_says_the_kernel_is_shutting_down(
    tmp_path: Path,
) -> None:
    home = make_home(
        tmp_path / "home",
        templates={"cmd": CMD_TEMPLATE.replace("step_seconds = 1", "step_seconds = 30")},
        script=CMD_SCRIPT,
    )
    # the step runs until the late submit was refused, so shutdown is still waiting for it
    # when that submit comes, however long its `pfar` takes to start
    gate = tmp_path / "go"
    k = KernelProcess(home)
    try:
        k.wait_ready()
        step = wait_for_file(gate)
        r = pfar(home, "submit", "cmd", step, "--json")
        assert r.returncode == 0, said(r)
        wait_for(
            lambda: _one_step_started(home), what="the slow step to start"
        )  # in flight: shutdown waits for it
        k.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert k.proc.poll() is None
        r = pfar(home, "submit", "cmd", "echo late")
        assert r.returncode == 1, said(r)
        assert said(r) == (
            "error: the kernel is shutting down and accepts no new work; "
            "try again when it has stopped"
        ), said(r)
        gate.touch()
        code = k.wait_exit(timeout=60)
    finally:
        gate.touch()  # a failed test leaves no step waiting behind a killed kernel
        if k.proc.poll() is None:
            k.kill()
    assert code == 0, k.output()
    assert list(task_states(home).values()) == ["Completed"]
    r = pfar(home, "submit", "cmd", "echo later")
    assert r.returncode == 2
    assert "no kernel is running" in said(r)


def _one_step_started(home: Home) -> bool:
    with db(home) as conn:
        return conn.execute("SELECT count(*) FROM task_steps").fetchone()[0] == 1
