"""Skills across a SIGKILL: the kernel is killed while the task's first model call is in
flight; meanwhile one skill's SKILL.md changes, another skill is removed and a new one
appears. The restarted task sees the skills it saw (journaled with its settings): its
system prompt lists the same ones, the changed one is served with a note saying it
changed, the removed one is an error naming it, and the new one is not given to it."""

from __future__ import annotations

import contextlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from ..support import loop_turns, make_home, owner_messages, task_states, wait_for
from .test_regressions import kernel, wait_state

pytestmark = pytest.mark.crash

SCRIPT = """
[[turns]]
turn = 1
delay_seconds = {delay}
text = "Loading the skills."
tool_calls = [
  {{ name = "Skill", input = {{ name = "count-lines" }} }},
  {{ name = "Skill", input = {{ name = "greet" }} }},
]

[[turns]]
text = "Done."
"""


def _skill(parent: Path, name: str, description: str, body: str) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")
    return folder


def _prompts(log: Path) -> list[str]:
    """The system prompt of each model call, as the PostContextAssembly hook was given it."""
    if not log.exists():
        return []
    return [json.loads(line)["system"] for line in log.read_text().splitlines() if line.strip()]


@pytest.mark.both_backends
def test_a_task_killed_mid_call_sees_the_skills_it_saw_after_the_restart(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    work = tmp_path / "work"
    counting = _skill(
        work / ".pfar" / "skills", "count-lines", "Count lines.", "Use wc -l on each file.\n"
    )
    config = '[loop]\ntools = ["Read", "Skill"]\nalways_allow = ["Read", "Skill"]\n'
    home = make_home(tmp_path / "home", script=SCRIPT.format(delay=60), config=config)
    greeting = _skill(home.skills_dir, "greet", "Greet warmly.", "Say hello.\n")
    log = tmp_path / "prompts.jsonl"
    hook = home.hooks_dir / "PostContextAssembly" / "record"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\ncat >> {log}\necho >> {log}\n")
    hook.chmod(0o700)

    with kernel(home) as k:
        tid = str(k.request("loop", prompt="count the lines", directory=str(work))["task_id"])
        wait_for(lambda: len(_prompts(log)) == 1, what="the first model call to start")
        k.kill()  # the model's answer never came

    before = _prompts(log)[0]
    assert "- count-lines: Count lines." in before and "- greet: Greet warmly." in before
    (counting / "SKILL.md").write_text(
        "---\nname: count-lines\ndescription: Count lines.\n---\nUse awk instead.\n"
    )
    shutil.rmtree(greeting)
    _skill(home.skills_dir, "late", "Came after the task.", "Too late.\n")
    (home.root / "scripts" / "default.toml").write_text(textwrap.dedent(SCRIPT.format(delay=0)))

    with kernel(home) as k:
        wait_state(home, tid, "WaitingForUser")
        # a task created now is given what is on disk now
        other = str(k.request("loop", prompt="later", directory=str(work))["task_id"])
        wait_state(home, other, "WaitingForUser")

    after = _prompts(log)[1]
    assert after == before  # the same skills, from the journal: "late" is not among them
    assert "late" not in after
    turns = loop_turns(home, tid)
    assert [t["kind"] for t in turns] == ["user", "assistant", "results", "assistant"]
    changed, gone = turns[2]["results"]
    assert not changed["is_error"]
    assert "changed on disk since this task started" in changed["content"]
    assert "Use awk instead." in changed["content"]
    assert gone["is_error"]
    assert f"its SKILL.md is gone from {greeting} since this task started" in gone["content"]
    newer = _prompts(log)[-1]
    assert "- late: Came after the task." in newer and "greet" not in newer


@pytest.mark.both_backends
def test_the_owner_hears_of_skipped_skills_though_the_kernel_dies_at_the_tasks_creation(
    tmp_path: Path,
) -> None:
    """The message naming a skill folder the task is not given commits with the task: a
    kill right after that commit loses neither, and the message is sent once."""
    tmp_path.chmod(0o700)
    work = tmp_path / "work"
    bad = work / ".pfar" / "skills" / "open"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\nname: open\ndescription: Anyone may edit me.\n---\n")
    (bad / "SKILL.md").chmod(0o666)
    home = make_home(tmp_path / "home", script='[[turns]]\ntext = "ok"\n')
    with kernel(home, fault="task_created") as k:
        with contextlib.suppress(Exception):  # the kernel dies under the call
            k.request("loop", prompt="go", directory=str(work), event_id="e-skills")
        assert k.killed_by_fault(), k.output()
    (tid,) = task_states(home)

    def told() -> list[str]:
        return [m["body"] for m in owner_messages(home) if "skill folder" in m["body"]]

    with kernel(home):
        wait_state(home, tid, "WaitingForUser")
        wait_for(lambda: told() != [], what="the message about the skipped skill")
    (body,) = told()
    assert f"- {bad}: SKILL.md is world-writable (mode 0666)" in body
