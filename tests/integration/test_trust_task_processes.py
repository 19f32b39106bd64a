"""What a task's unsandboxed Bash started in the background (`nohup … &`, `setsid …`)
does not outlive the task: it is ended when the task ends, and a kernel killed
mid-task leaves it to the next start, which ends it before any task resumes. Only
labelled processes of this home's tasks are touched."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from pfar.tools import task_processes
from pfar.vault.home import Home

from ..crash.test_regressions import kernel, rows
from ..support import make_home, wait_for

# sleeps with a length nothing else on the machine uses, to find them by command line
MARK = f"{900000 + os.getpid() % 99999}"


def _home(tmp_path: Path, marker: str) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    command = json.dumps(
        f"setsid sleep {marker} > /dev/null 2>&1 & "
        f"nohup sleep {marker} > /dev/null 2>&1 & "
        f"(sleep {marker} > /dev/null 2>&1 &) ; echo started"
    )
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Starting a server."
        tool_calls = [ {{ name = "Bash", input = {{ command = {command} }} }} ]

        [[turns]]
        text = "Done."
        """
    )
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n'
    return make_home(tmp_path / "home", script=script, config=config), work


def _sleeps(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv[:2] == [b"sleep", marker.encode()] and state != "Z":
            found.append(int(entry.name))
    return found


def _state(home: Home, task_id: str) -> str:
    return str(rows(home, "SELECT state FROM task_journal WHERE task_id = ?", task_id)[0][0])


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


def test_background_processes_end_with_their_task(tmp_path: Path) -> None:
    marker = MARK + "1"
    home, work = _home(tmp_path, marker)
    try:
        with kernel(home) as k:
            task = k.request("loop", prompt="serve it", directory=str(work), once=True)
            tid = task["task_id"]
            wait_for(lambda: _state(home, tid) == "Completed", timeout=30, what="completed")
            wait_for(lambda: not _sleeps(marker), timeout=10, what="the sleeps to be ended")
            k.terminate()
    finally:
        _kill(_sleeps(marker))


def test_background_processes_live_while_their_task_waits_and_end_when_it_is_cancelled(
    tmp_path: Path,
) -> None:
    marker = MARK + "3"
    home, work = _home(tmp_path, marker)
    try:
        with kernel(home) as k:
            task = k.request("loop", prompt="serve it", directory=str(work))
            tid = task["task_id"]
            wait_for(lambda: _state(home, tid) == "WaitingForUser", timeout=30, what="waiting")
            wait_for(lambda: len(_sleeps(marker)) == 3, timeout=10, what="the sleeps")
            started = _sleeps(marker)
            # the owner's turn: the task lives, so do its processes (a dev server, say)
            k.request("task_cancel", task_id=tid)
            wait_for(lambda: _state(home, tid) == "Cancelled", timeout=30, what="cancelled")
            wait_for(lambda: not set(started) & set(_sleeps(marker)), timeout=10, what="ended")
            k.terminate()
    finally:
        _kill(_sleeps(marker))


@pytest.mark.crash
def test_background_processes_of_a_killed_kernel_are_ended_at_the_next_start(
    tmp_path: Path,
) -> None:
    marker = MARK + "2"
    home, work = _home(tmp_path, marker)
    others: subprocess.Popen[bytes] | None = None
    stranger = subprocess.Popen(  # labelled for a task of no journal here: not ours
        ["sleep", marker],
        env={**os.environ, task_processes.LABEL: "a-task-of-another-home"},
        start_new_session=True,
    )
    try:
        with kernel(home, fault="tool_results") as k:
            k.request("loop", prompt="serve it", directory=str(work), once=True)
            assert k.killed_by_fault()
        left = [pid for pid in _sleeps(marker) if pid != stranger.pid]
        assert len(left) == 3, "the Bash's background sleeps should outlive the killed kernel"
        (found,) = rows(home, "SELECT task_id FROM task_journal")
        tid = found[0]
        if os.geteuid() == 0:  # another user's process carrying this task's label
            others = subprocess.Popen(
                ["sleep", marker],
                env={**os.environ, task_processes.LABEL: tid},
                user=65534,
                start_new_session=True,
            )
        with kernel(home) as k:
            wait_for(
                lambda: not set(left) & set(_sleeps(marker)), timeout=10, what="ended at start"
            )
            wait_for(lambda: _state(home, tid) == "Completed", timeout=30, what="completed")
            k.terminate()
        assert stranger.poll() is None  # a label of no task here is left alone
        if others is not None:
            assert others.poll() is None  # and so is another user's process
    finally:
        stranger.kill()
        stranger.wait()
        if others is not None:
            others.kill()
            others.wait()
        _kill(_sleeps(marker))


def test_a_workflow_steps_background_processes_end_with_its_task(tmp_path: Path) -> None:
    marker = MARK + "4"
    home = make_home(tmp_path / "home", script="")
    definition = tmp_path / "serve.toml"
    definition.write_text(
        'name = "serve"\n[[steps]]\nname = "start"\n'
        f'run = ["sh", "-c", "nohup sleep {marker} > /dev/null 2>&1 & echo started"]\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    try:
        with kernel(home) as k:
            started = k.request("workflow_start", definition=str(definition), directory=str(work))
            tid = started["task_id"]
            wait_for(lambda: _state(home, tid) == "Completed", timeout=30, what="completed")
            wait_for(lambda: not _sleeps(marker), timeout=10, what="the sleep to be ended")
            k.terminate()
    finally:
        _kill(_sleeps(marker))
