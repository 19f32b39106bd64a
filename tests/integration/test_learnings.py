"""The knowledge store through a real kernel: what a loop task learned is kept when it
completes, a later task about the same thing is given it in its system prompt (and
keeps the same learnings when resumed), `forget` takes it away, and a store that
cannot be opened leaves tasks running without learnings."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pfar.config import Config
from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, reply
from pfar.vault.home import Home

from ..crash.test_regressions import kernel
from ..support import make_home, pfar, said

LESSON = "The bug was in config.rs line 42: the parser expects an array, not an object."


class Model:
    """Answers once; keeps the system prompt each task was sent."""

    def __init__(self) -> None:
        self.systems: dict[str, str] = {}

    def __call__(self, request: ChatRequest) -> ChatResponse:
        prompt = request.messages[0].text
        self.systems[prompt] = request.system
        if prompt.startswith("Find"):
            return reply(request, f"Found it. {LESSON} Fixed by reading a list.")
        return reply(request, "Looked at it; nothing to keep here.")


async def _run(home: Home, model: Model, *prompts: str) -> tuple[Operator, list[str]]:
    kernel = Kernel(home, Config.load(home.config), model=ScriptedChatModel(model))
    await kernel.start()
    op = Operator(kernel)
    ids = []
    try:
        for prompt in prompts:
            started = await op.start_loop(prompt, str(home.root), once=True)
            ids.append(started.task_id)
            await kernel.wait_idle()
            assert (await op.task(started.task_id)).state is TaskState.Completed
        return op, ids
    finally:
        await kernel.shutdown()


def _home(tmp_path: Path) -> Home:
    # the script is for the kernel process the CLI talks to; in-process kernels use Model
    return make_home(
        tmp_path / "home", config='[loop]\ntools = ["Read"]\n', script='[[turns]]\ntext = "ok"\n'
    )


def test_a_learning_of_one_task_is_given_to_a_later_one_until_forgotten(tmp_path: Path) -> None:
    home = _home(tmp_path)
    model = Model()
    _, (first, _) = asyncio.run(
        _run(home, model, "Find why config loading fails", "Fix the config loading bug")
    )
    later = model.systems["Fix the config loading bug"]
    assert "Relevant learnings from previous tasks:" in later
    assert LESSON in later and f"(from task {first[:8]})" in later
    assert "Relevant learnings" not in model.systems["Find why config loading fails"]

    with kernel(home) as k:
        listed = pfar(home, "learnings", "--json")
        assert listed.returncode == 0, said(listed)
        assert LESSON in listed.stdout and "config.rs" in listed.stdout
        found = pfar(home, "learnings", "search", "parser array")
        assert LESSON[:30] in found.stdout.replace("\n", " ") or "config.rs" in found.stdout
        events = pfar(home, "events", "--json")
        assert "LearningExtracted" in events.stdout
        (learning_id,) = [
            x["learning_id"] for x in json.loads(listed.stdout) if x["content"] == LESSON
        ]
        gone = pfar(home, "learnings", "forget", learning_id[:8])
        assert gone.returncode == 0 and "forgot" in gone.stdout, said(gone)
        again = pfar(home, "learnings", "forget", learning_id[:8])
        assert again.returncode != 0 and learning_id[:8] in said(again)
        k.request("ping")

    model = Model()
    asyncio.run(_run(home, model, "Fix the config loading bug again"))
    assert "Relevant learnings" not in model.systems["Fix the config loading bug again"]


def test_an_unopenable_store_leaves_tasks_running_without_learnings(tmp_path: Path) -> None:
    home = _home(tmp_path)
    model = Model()
    asyncio.run(_run(home, model, "Find why config loading fails"))
    home.memory_db.write_bytes(b"")  # emptied: the store refuses it, named in the log
    model = Model()
    asyncio.run(_run(home, model, "Fix the config loading bug"))
    assert "Relevant learnings" not in model.systems["Fix the config loading bug"]


class Refiner(Model):
    """Answers tasks as Model does; answers the hybrid mode's question with `refined`."""

    def __init__(self, refined: str) -> None:
        super().__init__()
        self.refined = refined
        self.asked: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> ChatResponse:
        if "notebook of learnings" in request.system:
            self.asked.append(request)
            return reply(request, self.refined)
        return super().__call__(request)


def _hybrid(tmp_path: Path) -> Home:
    return make_home(
        tmp_path / "home",
        config='[loop]\ntools = ["Read"]\nlearnings = "hybrid"\n',
        script='[[turns]]\ntext = "ok"\n',
    )


def test_hybrid_mode_keeps_what_the_cheap_tier_rewords(tmp_path: Path) -> None:
    home = _hybrid(tmp_path)
    reworded = "config.rs line 42: the config parser expects an array of tables, not an object."
    model = Refiner(json.dumps([reworded]))
    asyncio.run(_run(home, model, "Find why config loading fails"))
    (asked,) = model.asked
    assert LESSON in asked.messages[0].text  # the candidate it was shown
    assert "Find why config loading fails" in asked.messages[0].text
    model = Model()
    asyncio.run(_run(home, model, "Fix the config parser"))
    later = model.systems["Fix the config parser"]
    assert reworded in later and LESSON not in later


@pytest.mark.parametrize(
    "answer", ["I think they are all good.", '{"keep": 1}', json.dumps(["too short"])]
)
def test_hybrid_mode_keeps_the_candidates_when_the_refinement_fails(
    tmp_path: Path, answer: str
) -> None:
    home = _hybrid(tmp_path)
    asyncio.run(_run(home, Refiner(answer), "Find why config loading fails"))
    model = Model()
    asyncio.run(_run(home, model, "Fix the config loading bug"))
    assert LESSON in model.systems["Fix the config loading bug"]


def test_hybrid_mode_may_keep_nothing(tmp_path: Path) -> None:
    home = _hybrid(tmp_path)
    asyncio.run(_run(home, Refiner("[]"), "Find why config loading fails"))
    model = Model()
    asyncio.run(_run(home, model, "Fix the config loading bug"))
    assert "Relevant learnings" not in model.systems["Fix the config loading bug"]
