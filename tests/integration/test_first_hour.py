"""A newcomer's first hour, through real processes: the README's block on a slow start,
`pfar run &` in an interactive terminal, `--wait` on its own task, big input, and a
graceful stop that says what it does."""

from __future__ import annotations

import contextlib
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

from ..support import KernelProcess, make_home, pfar, said, wait_for

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
