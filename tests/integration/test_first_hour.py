"""A newcomer's first hour, through real processes: the README's block on a slow start,
`pfar run &` in an interactive terminal, `--wait` on its own task, big input, and a
graceful stop that says what it does."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pfar.vault.home import Home, HomeLock

from ..support import (
    KernelProcess,
    db,
    make_home,
    pfar,
    running_kernel,
    said,
    task_states,
    wait_for,
)

PFAR = [sys.executable, "-m", "pfar"]
TERMINAL = {"Completed", "Failed", "Cancelled", "Abandoned"}

SLOW_START = {"PFAR_FAULT_SLOW_START": "6"}


def _starting(home: Home) -> None:
    """The kernel holds its home but has no control socket yet: it is starting."""
    wait_for(lambda: HomeLock(home).is_held_elsewhere(), what="the kernel to take its home")
    assert not home.control_socket.exists(), "the start was not slow enough to test"


def test_a_command_waits_for_a_starting_kernel(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    k = KernelProcess(home, env=SLOW_START)
    try:
        _starting(home)
        r = pfar(home, "submit", "note", "buy milk", "--wait")
        assert r.returncode == 0, said(r)
        assert "Completed" in r.stdout
        # said once, on stderr, with the bound and how to change it
        assert r.stderr.count("is starting; waiting up to 60s") == 1, r.stderr
        assert "PFAR_START_WAIT" in r.stderr
    finally:
        k.terminate()


def test_start_wait_zero_does_not_wait(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    k = KernelProcess(home, env=SLOW_START)
    try:
        _starting(home)
        env_home = str(home.root)
        r = subprocess.run(
            [sys.executable, "-m", "pfar", "--home", env_home, "submit", "note", "x"],
            capture_output=True,
            text=True,
            env={**os.environ, "PFAR_START_WAIT": "0"},
            timeout=60,
            check=False,
        )
        assert r.returncode == 2, said(r)
        assert "not answering on its control socket yet" in r.stderr
    finally:
        k.terminate()


def test_ready_file_appears_when_the_kernel_answers(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    ready = tmp_path / "kernel.ready"
    ready.write_text("12345\n")  # left by a kernel that was killed: not a sign of this one
    env = {**os.environ, "PFAR_HOME": str(home.root), **SLOW_START}
    env.pop("PFAR_FAULT", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pfar", "run", "--no-stdin", "--ready-file", str(ready)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _starting(home)
        assert not ready.exists()
        wait_for(ready.exists, timeout=60, what="the ready file")
        assert ready.read_text().strip() == str(proc.pid)
        # ready means ready: a command that does not wait for a start is answered
        r = subprocess.run(
            [sys.executable, "-m", "pfar", "--home", str(home.root), "submit", "note", "y"],
            capture_output=True,
            text=True,
            env={**os.environ, "PFAR_START_WAIT": "0"},
            timeout=60,
            check=False,
        )
        assert r.returncode == 0, said(r)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert not ready.exists()  # gone with the kernel


# -- `pfar run &` in an interactive terminal ------------------------------------------

# A shell with job control in miniature: it owns the terminal (its group is the
# foreground one) and starts the kernel in a process group of its own, as `pfar run &`
# does, with the terminal as the kernel's stdin.
SHELL = textwrap.dedent(
    """
    import subprocess, sys
    proc = subprocess.Popen(
        [sys.executable, "-m", "pfar", "run"], process_group=0, stdout=subprocess.DEVNULL
    )
    with open(sys.argv[1], "w") as f:
        f.write(str(proc.pid))
    sys.exit(proc.wait())
    """
)


@contextmanager
def _background_kernel(home: Home, pidfile: Path) -> Iterator[tuple[int, int, list[bytes]]]:
    """(the kernel's pid, the terminal's master side, what the terminal showed)."""
    env = {**os.environ, "PFAR_HOME": str(home.root)}
    env.pop("PFAR_FAULT", None)
    shell, master = pty.fork()  # the child: a session leader with the pty as its terminal
    if shell == 0:
        os.execve(sys.executable, [sys.executable, "-c", SHELL, str(pidfile)], env)
    seen: list[bytes] = []

    def drain() -> None:  # the terminal shows what the kernel says; read it, never block
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            seen.append(data)

    threading.Thread(target=drain, daemon=True).start()
    kernel = 0
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="the kernel's pid")
        kernel = int(pidfile.read_text())
        wait_for(home.control_socket.exists, timeout=60, what="the kernel's socket")
        yield kernel, master, seen
    finally:
        if kernel:
            with contextlib.suppress(ProcessLookupError):
                os.kill(kernel, signal.SIGKILL)
        os.waitpid(shell, 0)
        os.close(master)


def _state(pid: int) -> str:
    """The process's state letter from /proc: T when stopped (by SIGTTIN, say)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def test_a_kernel_in_the_background_never_reads_the_terminal(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    with _background_kernel(home, tmp_path / "kernel.pid") as (kernel, master, seen):
        r = pfar(home, "submit", "note", "first", "--wait")
        assert r.returncode == 0, said(r)
        # the owner types at the shell: the line waits for whoever reads the terminal,
        # and a kernel that read it from the background would be stopped (SIGTTIN)
        os.write(master, b"tasks\n")
        r = pfar(home, "submit", "note", "second", "--wait", timeout=30)
        assert r.returncode == 0, said(r)
        assert _state(kernel) != "T", "the kernel was stopped by its terminal"
        wait_for(
            lambda: b"commands on the terminal are not read" in b"".join(seen),
            what="the kernel to say it does not read the terminal",
        )


# -- `--wait` waits for its own task ----------------------------------------------------

SLOW_TEMPLATE = """
    id = "cmd"
    description = "Run a shell command"
    allowed_tools = ["shell.run"]
    [timeouts]
    step_seconds = 300
"""

SLOW_SCRIPT = """
    [[responses]]
    template = "cmd"
    phase = "plan"
    json = { steps = [ { tool = "shell.run", args = { argv = ["sh", "-c", "$input"] } } ] }

    [[responses]]
    template = "cmd"
    phase = "synthesize"
    text = "ran: $step0"
"""


def _cmd_home(tmp_path: Path) -> Home:
    return make_home(tmp_path / "home", templates={"cmd": SLOW_TEMPLATE}, script=SLOW_SCRIPT)


def _until_file(path: Path) -> str:
    """A command that runs until `path` exists: an unrelated task, as slow as we like."""
    return f"while [ ! -e {path} ]; do sleep 0.1; done; echo released"


def test_wait_waits_for_its_own_task_and_prints_its_answer(tmp_path: Path) -> None:
    home = _cmd_home(tmp_path)
    go = tmp_path / "go"
    with running_kernel(home):
        slow = pfar(home, "submit", "cmd", _until_file(go), "--json")
        assert slow.returncode == 0, said(slow)
        slow_id = json.loads(slow.stdout)["task_id"]
        try:
            r = pfar(home, "submit", "cmd", "echo hello from a task", "--wait", timeout=120)
            assert r.returncode == 0, said(r)
            assert "Completed" in r.stdout
            assert "hello from a task" in r.stdout  # its answer, not only its state
            # the unrelated task is still at work: --wait did not wait for it
            assert task_states(home)[slow_id] not in TERMINAL
            mine = r.stdout.split()[1]
            shown = pfar(home, "task", "show", mine)
            assert "input: echo hello from a task" in shown.stdout, shown.stdout
            assert "answer: ran:" in shown.stdout and "hello from a task" in shown.stdout
            as_json = json.loads(pfar(home, "task", "show", mine, "--json").stdout)
            assert as_json["input"] == "echo hello from a task"
            assert "hello from a task" in as_json["answer"]
        finally:
            go.touch()


def test_wait_exits_non_zero_for_a_failed_or_cancelled_task(tmp_path: Path) -> None:
    home = _cmd_home(tmp_path)
    go = tmp_path / "go"
    with running_kernel(home):
        failed = pfar(home, "submit", "cmd", "echo broken >&2; exit 7", "--wait", timeout=120)
        assert failed.returncode == 3, said(failed)
        assert "Failed" in failed.stdout and "error:" in failed.stdout
        as_json = pfar(home, "submit", "cmd", "exit 7", "--wait", "--json", timeout=120)
        assert as_json.returncode == 3, said(as_json)
        assert json.loads(as_json.stdout)["state"] == "Failed"
        # a waiter on a task that is cancelled meanwhile
        env = {**os.environ, "COLUMNS": "1000"}
        env.pop("PFAR_HOME", None)
        waiter = subprocess.Popen(
            [*PFAR, "--home", str(home.root), "submit", "cmd", _until_file(go), "--wait"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            running = wait_for(
                lambda: [t for t, st in task_states(home).items() if st == "Executing"],
                what="the task to run",
            )
            r = pfar(home, "cancel", running[0])
            assert r.returncode == 0, said(r)
            out, err = waiter.communicate(timeout=120)
            assert waiter.returncode == 4, out + err
            assert "Cancelled" in out
        finally:
            go.touch()
            if waiter.poll() is None:
                waiter.kill()


# -- a graceful stop says what it does ---------------------------------------------------


def _long_shutdown_wait(home: Home) -> None:
    """A wait longer than any test: a stop that does not end at once would hang."""
    text = home.config.read_text()
    assert "shutdown_timeout_seconds = 30" in text
    home.config.write_text(
        text.replace("shutdown_timeout_seconds = 30", "shutdown_timeout_seconds = 600")
    )


def _executing(home: Home) -> str:
    running = wait_for(
        lambda: [t for t, st in task_states(home).items() if st == "Executing"],
        what="a task to run",
    )
    return str(running[0])


def test_a_graceful_stop_says_what_it_waits_for_and_prints_a_result_once(
    tmp_path: Path,
) -> None:
    home = _cmd_home(tmp_path)
    _long_shutdown_wait(home)
    go = tmp_path / "go"
    k = KernelProcess(home)
    try:
        k.wait_ready()
        assert pfar(home, "submit", "cmd", _until_file(go)).returncode == 0
        task_id = _executing(home)
        k.proc.send_signal(signal.SIGINT)
        wait_for(lambda: "waiting up to 600s" in k.output(), what="the stop to say so")
        said_then = k.output()
        assert f"1 running task ({task_id[:8]})" in said_then, said_then
        assert "Ctrl-C again stops at once" in said_then
        go.touch()  # the task finishes during the wait: its result is printed, once
        assert k.wait_exit(60) == 0, k.output()
    finally:
        go.touch()
        if k.proc.poll() is None:
            k.kill()
    out = k.output()
    assert out.count("[pfar → owner] Task") == 1, out
    assert "shut down cleanly" in out


def test_a_second_ctrl_c_stops_at_once_and_leaves_the_task_to_recovery(
    tmp_path: Path,
) -> None:
    home = _cmd_home(tmp_path)
    _long_shutdown_wait(home)
    go = tmp_path / "go"
    k = KernelProcess(home)
    try:
        k.wait_ready()
        assert pfar(home, "submit", "cmd", _until_file(go)).returncode == 0
        task_id = _executing(home)
        k.proc.send_signal(signal.SIGINT)
        wait_for(lambda: "waiting up to 600s" in k.output(), what="the stop to say so")
        k.proc.send_signal(signal.SIGINT)
        assert k.wait_exit(120) == 130, k.output()
    finally:
        go.touch()
        if k.proc.poll() is None:
            k.kill()
    out = k.output()
    assert "stopping at once" in out, out
    assert "1 task(s) left in the journal for the next start" in out, out
    # left as it was, for the next start's recovery; the journal was closed cleanly
    assert task_states(home)[task_id] not in TERMINAL
    preview = pfar(home, "recover", "--dry-run", "--json")
    assert task_id in preview.stdout, said(preview)


# -- big input -----------------------------------------------------------------------------


def test_submit_and_loop_take_their_text_from_stdin_or_a_file(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    big = "buy milk and " * 50_000  # 650 KB: far over what one argv word may be
    note = tmp_path / "note.txt"
    note.write_text(big + "\n")
    with running_kernel(home):
        r = pfar(home, "submit", "note", "--file", str(note), "--wait", "--json", timeout=120)
        assert r.returncode == 0, said(r)
        shown = json.loads(
            pfar(home, "task", "show", json.loads(r.stdout)["task_id"], "--json").stdout
        )
        assert shown["input"] == big  # whole, its final newline aside
        r = pfar(home, "submit", "note", "-", "--wait", "--json", stdin="from stdin\n")
        assert r.returncode == 0, said(r)
        shown = json.loads(
            pfar(home, "task", "show", json.loads(r.stdout)["task_id"], "--json").stdout
        )
        assert shown["input"] == "from stdin"
        prompt = (
            "tidy up " * 30_000
        )  # 240 KB: over argv's 128 KiB a word, within the model's budget
        r = pfar(
            home, "loop", "-", "--once", "--dir", str(tmp_path), "--wait", "--json", stdin=prompt
        )
        assert r.returncode == 0, said(r)
        shown = json.loads(
            pfar(home, "task", "show", json.loads(r.stdout)["task_id"], "--json").stdout
        )
        assert shown["input"] == prompt
        # what cannot be sent is refused with the file or the limit named, nothing sent
        missing = pfar(home, "submit", "note", "--file", str(tmp_path / "nope.txt"))
        assert missing.returncode == 1 and "nope.txt" in missing.stderr, said(missing)
        huge = tmp_path / "huge.txt"
        huge.write_text("x" * (2 << 20))
        over = pfar(home, "loop", "--file", str(huge), "--dir", str(tmp_path))
        assert over.returncode == 1 and "at most 1 MiB" in over.stderr, said(over)
        binary = tmp_path / "binary"
        binary.write_bytes(b"\xff\xfe")
        bad = pfar(home, "submit", "note", "--file", str(binary))
        assert bad.returncode == 1 and "not UTF-8" in bad.stderr, said(bad)
        both = pfar(home, "submit", "note", "text", "--file", str(note))
        assert both.returncode != 0 and "not both" in both.stderr, said(both)


def test_a_huge_line_on_stdin_does_not_hold_up_the_kernel(tmp_path: Path) -> None:
    """One word just under 1 MiB takes shlex many seconds: it is parsed off the event
    loop, so a command over the control socket meanwhile is answered first."""
    home = _cmd_home(tmp_path)
    env = {**os.environ, "PFAR_HOME": str(home.root)}
    env.pop("PFAR_FAULT", None)
    out_path = tmp_path / "kernel.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [*PFAR, "run"], env=env, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT
        )
    assert proc.stdin is not None
    try:
        wait_for(home.control_socket.exists, timeout=60, what="the kernel's socket")
        proc.stdin.write(b"submit nosuch " + b"a" * 1_000_000 + b"\n")
        proc.stdin.flush()
        r = pfar(home, "submit", "cmd", "echo served meanwhile", "--wait", timeout=300)
        assert r.returncode == 0, said(r)
        # the huge line's answer comes after: the kernel was not held up by it
        assert "no such template" not in out_path.read_text(errors="replace")
        wait_for(
            lambda: "no such template" in out_path.read_text(errors="replace"),
            timeout=300,
            what="the huge line's answer",
        )
    finally:
        proc.kill()
        proc.wait()


def test_wait_exits_5_for_an_abandoned_task(tmp_path: Path) -> None:
    home = _cmd_home(tmp_path)
    go = tmp_path / "go"
    command = _until_file(go)
    k = KernelProcess(home)
    try:
        k.wait_ready()
        r = pfar(home, "submit", "cmd", command, "--event-id", "e-1")
        assert r.returncode == 0, said(r)
        task_id = _executing(home)
    finally:
        k.kill()
    go.touch()
    with db(home) as conn:  # it last moved long ago: the next start abandons it
        conn.execute(
            "UPDATE task_journal SET updated_at = '2000-01-01T00:00:00Z' WHERE task_id = ?",
            (task_id,),
        )
    with running_kernel(home):
        assert task_states(home)[task_id] == "Abandoned"
        # the same event again is the same task: --wait reports how it ended
        r = pfar(home, "submit", "cmd", command, "--event-id", "e-1", "--wait")
        assert r.returncode == 5, said(r)
        assert f"task {task_id} Abandoned" in r.stdout
