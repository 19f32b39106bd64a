"""A skill's scripts in the sandbox, with real bubblewrap: a task directory's skill runs
in place; a home skill's script cannot be run from the home (a sandboxed command does
not see it), and runs once the model has written its text (from the Skill tool) into
the working directory, as docs/skills.md says."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pfar.journal.turns import ResultsTurn
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.tools import sandbox

from ..support import make_home
from .test_loop_skills import write_skill

if not sandbox.available():
    if os.environ.get("CI") == "true":  # scripts/check.py installs it where it can
        raise RuntimeError("bubblewrap (bwrap) is not installed, and CI=true tests sandboxes")
    pytest.skip("bubblewrap (bwrap) is not installed", allow_module_level=True)

CONFIG = (
    '[loop]\ntools = ["Write", "Bash", "Skill"]\n'
    'always_allow = ["Write", "Bash", "Skill"]\n[sandbox]\nenabled = true\n'
)


def test_skill_scripts_in_the_sandbox(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    work = tmp_path / "work"
    write_skill(
        work / ".pfar" / "skills", "here", "Runs in place.", "Run it.\n", "echo run in place\n"
    )
    home = make_home(tmp_path / "home", config=CONFIG)
    mine = write_skill(
        home.skills_dir, "greet", "Greets.", "Run it.\n", "echo hello from the home\n"
    )
    script: list[list[ToolCall]] = [
        [ToolCall("b1", "Bash", {"command": "sh .pfar/skills/here/scripts/run.sh"})],
        [ToolCall("b2", "Bash", {"command": f"sh {mine}/scripts/run.sh"})],
        [ToolCall("s1", "Skill", {"name": "greet", "file": "scripts/run.sh"})],
    ]

    def model(request: ChatRequest) -> ChatResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < len(script):
            return reply(request, "", script[turn])
        if turn == len(script):  # the home skill's script, written where it can run
            text = request.messages[-1].tool_results[0].content
            return reply(
                request,
                "",
                [
                    ToolCall("w1", "Write", {"file_path": "greet.sh", "content": text}),
                    ToolCall("b3", "Bash", {"command": "sh greet.sh"}),
                ],
            )
        return reply(request, "done")

    async def go() -> dict[str, tuple[str, bool]]:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("run the skills", str(work))
            await op.wait_idle()
            turns = [t.turn for t in await op.journal.loops.turns(started.task_id)]
            return {
                r.call_id: (r.content, r.is_error)
                for t in turns
                if isinstance(t, ResultsTurn)
                for r in t.results
            }

    told = asyncio.run(go())
    assert told["b1"] == ("run in place\n", False)
    content, _ = told["b2"]  # the home is not in the sandbox
    assert "cannot open" in content and "No such file" in content and "[exit code 2]" in content
    assert told["s1"] == ("echo hello from the home\n", False)
    assert told["b3"] == ("hello from the home\n", False)


@pytest.mark.parametrize("has_skills", [True, False])
def test_a_sandboxed_command_cannot_plant_a_skill(tmp_path: Path, has_skills: bool) -> None:
    tmp_path.chmod(0o700)
    work = tmp_path / "work"
    work.mkdir()
    if has_skills:
        write_skill(work / ".pfar" / "skills", "here", "The owner's.", "Run it.\n", "true\n")
    home = make_home(tmp_path / "home", config=CONFIG)
    plant = (
        "mkdir -p .pfar/skills/planted && echo x > .pfar/skills/planted/SKILL.md; "
        "mv .pfar .pfar-old; echo x > .pfar/skills/here/SKILL.md; echo x > mine.txt"
    )

    def model(request: ChatRequest) -> ChatResponse:
        if any(m.role == "assistant" for m in request.messages):
            return reply(request, "done")
        return reply(request, "", [ToolCall("b1", "Bash", {"command": plant})])

    async def go() -> None:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            await op.start_loop("plant a skill", str(work))
            await op.wait_idle()

    asyncio.run(go())
    assert (work / "mine.txt").read_text() == "x\n"  # the rest of the directory is writable
    assert not (work / ".pfar-old").exists()
    assert not (work / ".pfar" / "skills" / "planted").exists()
    if has_skills:
        assert (work / ".pfar" / "skills" / "here" / "SKILL.md").read_text().startswith("---")
    else:  # the empty mount point is all that is left
        assert list((work / ".pfar").iterdir()) == []
