"""Skills across a SIGKILL: the kernel is killed while the task's first model call is in
flight; meanwhile one skill's SKILL.md changes, another skill is removed and a new one
appears. The restarted task sees the skills it saw (journaled with its settings): its
system prompt lists the same ones, the changed one is served with a note saying it
changed, the removed one is an error naming it, and the new one is not given to it."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from ..support import loop_turns, make_home, wait_for
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
