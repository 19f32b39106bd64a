"""`pfar task retry` of a Failed task, through the real kernel: a loop task whose model
call fails (after its command ran) is retried; the kernel is SIGKILLed right after
the retry is journaled and before the task moves on; the next start continues it once.
The command's far side (a log outside the task's directory) shows it ran once; the
failures are counted on Failed, and each retry is in the timeline with who did it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pfar.journal.payloads import Failed
from pfar.vault.home import Home

from ..support import make_home, owner_messages, pfar, said, task_record, wait_for
from .test_regressions import kernel, lines_of, wait_state

pytestmark = pytest.mark.crash

FAILING = """
    [[turns]]
    turn = 2
    error = "the provider is overloaded"
"""
ANSWERING = """
    [[turns]]
    turn = 2
    text = "Done: it ran."
"""


def _script(log: Path, second: str) -> str:
    command = f"echo ran >> {log}"
    first = f"""
        [[turns]]
        turn = 1
        text = "Running the command."
        tool_calls = [
          {{ name = "shell.run", input = {{ argv = ["sh", "-c", {json.dumps(command)}] }} }},
        ]
        """
    return textwrap.dedent(first) + textwrap.dedent(second)


def _home(tmp_path: Path, log: Path) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    config = '[loop]\ntools = ["shell.run"]\nalways_allow = ["shell.run"]\n'
    home = make_home(tmp_path / "home", script=_script(log, FAILING), config=config)
    return home, work


def _set_script(home: Home, log: Path, second: str) -> None:
    (home.root / "scripts" / "default.toml").write_text(_script(log, second))


def _failed(home: Home, task_id: str) -> Failed:
    payload = task_record(home, task_id).payload
    assert isinstance(payload, Failed), payload
    return payload


def _failed_again(home: Home, task_id: str) -> bool:
    payload = task_record(home, task_id).payload
    return isinstance(payload, Failed) and payload.retry_count == 1


def _timeline(home: Home, task_id: str) -> str:
    shown = pfar(home, "task", "show", task_id[:8])
    assert shown.returncode == 0, said(shown)
    return said(shown)


@pytest.mark.both_backends
def test_a_retry_cut_off_by_a_crash_continues_once_from_where_the_task_failed(
    tmp_path: Path,
) -> None:
    log = tmp_path / "effects.log"
    home, work = _home(tmp_path, log)
    with kernel(home) as k:
        tid = str(k.request("loop", prompt="run it", directory=str(work), once=True)["task_id"])
        wait_state(home, tid, "Failed")
        first = _failed(home, tid)
        assert first.recoverable and first.retry_count == 0
        notice = [m for m in owner_messages(home) if m["key"] == f"failed:{tid}"]
        assert notice and f"pfar task retry {tid[:8]}" in notice[0]["body"]
        assert f"its failure is recoverable: pfar task retry {tid[:8]}" in _timeline(home, tid)
        # the model still fails: the retry runs, and the task fails again, counted
        retried = pfar(home, "task", "retry", tid[:8])
        assert retried.returncode == 0, said(retried)
        assert f"task {tid} retried (retry 1)" in said(retried)
        wait_for(lambda: _failed_again(home, tid), what="the second failure")
        k.terminate()

    _set_script(home, log, ANSWERING)
    with kernel(home, fault="task_retried") as k:
        retried = pfar(home, "task", "retry", tid[:8])  # the kernel dies with its commit
        assert k.killed_by_fault(), said(retried)
    assert task_record(home, tid).state.value == "Executing"

    with kernel(home) as k:
        wait_state(home, tid, "Completed")
        again = pfar(home, "task", "retry", tid[:8])
        assert again.returncode != 0
        assert "Completed" in said(again) and "nothing was changed" in said(again)
        k.terminate()
    assert lines_of(log) == ["ran"]  # the command's one run, before the first failure
    story = _timeline(home, tid)
    assert "its failure is recoverable" not in story
    assert story.count("retried (retry") == 2, story
    assert "retried (retry 2, Executing) by cli (uid" in story, story
    assert "after: the model call failed" in story, story
    keys = [m["key"] for m in owner_messages(home) if m["key"].startswith("failed:")]
    assert keys == [f"failed:{tid}", f"failed:{tid}:1"]  # each failure told once
