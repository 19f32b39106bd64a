"""The bus tells the truth about a queue, through a real kernel and the CLI: a task that
goes straight into the queue is created, queued and scheduled, never "started" (no
TaskStarted on the bus, no TaskStarted hook), while a task that finds a free slot is
created and started (docs/events.md)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from pfar.vault.home import Home

from ..support import make_home, pfar, running_kernel, task_states, wait_for


def _home(tmp_path: Path, log: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    # the first task holds the only slot until the test creates `go`
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        match = "^first"
        text = "Waiting for go."
        tool_calls = [{ name = "Bash", input = { command = "until [ -f go ]; do sleep 1; done" } }]

        [[turns]]
        text = "Done."
        """
    )
    hooks = "".join(
        f'[[hooks]]\npoint = "{point}"\ncommand = "echo {point} $PFAR_TASK_ID >> {log}"\n'
        for point in ("TaskCreated", "TaskStarted", "TaskScheduled")
    )
    config = (
        '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n'
        "[scheduler]\nmax_concurrent = 1\n" + hooks
    )
    return make_home(tmp_path / "home", script=script, config=config), work


def _kinds(home: Home, task_id: str) -> list[str]:
    listed = pfar(home, "events", "--json")
    assert listed.returncode == 0, listed.stderr
    events = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    return [e["kind"] for e in events if e["task_id"] == task_id]


def _hooked(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_task_that_waits_in_the_queue_is_never_said_to_have_started(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    home, work = _home(tmp_path, log)
    with running_kernel(home) as k:
        first = k.request("loop", prompt="first", directory=str(work))["task_id"]
        second = k.request("loop", prompt="second", directory=str(work), once=True)["task_id"]
        wait_for(lambda: task_states(home).get(second) == "Queued", timeout=30, what="queued")
        (work / "go").write_text("")
        wait_for(
            lambda: task_states(home).get(second) == "Completed", timeout=60, what="second ran"
        )
        wait_for(lambda: f"TaskScheduled {second}" in _hooked(log), timeout=30, what="hook")

        assert _kinds(home, first)[:2] == ["TaskCreated", "TaskStarted"]  # a free slot
        kinds = _kinds(home, second)
        assert kinds[:3] == ["TaskCreated", "TaskQueued", "TaskScheduled"], kinds
        assert "TaskStarted" not in kinds
        # the hooks are fed from the bus, in commit order: the second's TaskScheduled
        # hook ran, so a TaskStarted of it would have been heard before
        hooked = _hooked(log)
        assert f"TaskStarted {first}" in hooked
        assert f"TaskStarted {second}" not in hooked
        assert hooked.index(f"TaskCreated {second}") < hooked.index(f"TaskScheduled {second}")
