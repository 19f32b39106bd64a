"""A pipeline task goes on from the row its own move committed, without reading it
again: after extraction, planning and each step, what it goes on from is what the
journal holds (but for `updated_at`, which only the journal's clock sets)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from pfar.config import Config
from pfar.journal import TaskRecord, TaskState
from pfar.journal.payloads import Extracting
from pfar.journal.records import InboundEvent, TaskKind
from pfar.kernel import Kernel
from pfar.runners import pipeline

from ..support import make_home

TEMPLATE = """
id = "mirror"
description = "reads two files"
allowed_tools = ["file.read"]
"""

SCRIPT = """
[[responses]]
template = "mirror"
phase = "extract"
json = { topic = "files", count = 2 }

[[responses]]
template = "mirror"
phase = "plan"
json = { steps = [
  { tool = "file.read", args = { path = "a.txt" }, description = "first" },
  { tool = "file.read", args = { path = "b.txt" }, description = "second" },
] }
"""


def _but_the_clock(task: TaskRecord) -> TaskRecord:
    return dataclasses.replace(task, updated_at="")


def test_each_move_leaves_the_task_as_the_journal_holds_it(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"mirror": TEMPLATE}, script=SCRIPT)

    async def scene() -> None:
        kernel = Kernel(home, Config.load(home.config))
        await kernel.start()
        try:
            tpl = kernel.templates.get("mirror")
            assert tpl is not None
            event = InboundEvent("ev-mirror", "api", "mirror", "hi")
            # journaled, but not handed to the kernel: this test moves it, step by step
            new = TaskRecord.new(
                TaskKind.pipeline,
                "mirror",
                event,
                Extracting(),
                data_ceiling=tpl.data_ceiling,
                output_sinks=list(tpl.output_sinks),
                template_hash=tpl.content_hash,
            )
            # as after a restart: each move sets the count of recoveries back to 0
            new = dataclasses.replace(new, recovery_attempts=1)
            task, _ = await kernel.journal.tasks.create(new, event)
            workspace = kernel.services.workspace(task.task_id)
            workspace.mkdir(parents=True, exist_ok=True)
            (workspace / "a.txt").write_text("one")
            (workspace / "b.txt").write_text("two")

            async def stored() -> TaskRecord:
                return _but_the_clock(await kernel.journal.tasks.get(task.task_id))

            extracted = await pipeline._extract(task, kernel.services)
            assert extracted is not None and extracted.state is TaskState.Planning
            assert _but_the_clock(extracted) == await stored()

            planned = await pipeline._plan(extracted, kernel.services)
            assert planned is not None and planned.state is TaskState.Executing
            assert _but_the_clock(planned) == await stored()

            first = await pipeline._execute_step(planned, kernel.services, fresh=True)
            assert isinstance(first, TaskRecord) and first.state is TaskState.Executing
            assert _but_the_clock(first) == await stored()

            last = await pipeline._execute_step(first, kernel.services, fresh=True)
            assert isinstance(last, TaskRecord) and last.state is TaskState.Synthesizing
            assert _but_the_clock(last) == await stored()
        finally:
            await kernel.shutdown()

    asyncio.run(scene())
