"""`Operator.subscribe` on a real kernel: the event bus live, in commit order, from a
number or from now, for one task or all; closing a view or stopping the kernel ends it
and leaves nothing running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pfar import Home, Operator, init_home, open_kernel
from pfar.errors import BadRequest, UnknownTask
from pfar.kernel.api import BusEventView
from pfar.kernel.api.wire import wire_json

LIFE = ["TaskCreated", "TaskStarted", "TaskCompleted"]


def _home(tmp_path: Path) -> Home:
    home = Home(tmp_path / "home")
    init_home(home)  # the example templates: note (write, read), run_command (asks first)
    return home


async def _until(
    view: AsyncIterator[BusEventView], task_id: str | None, kind: str
) -> list[BusEventView]:
    """The view's events up to the first `kind` of `task_id` (of any task: None)."""
    seen = []
    async with asyncio.timeout(30):
        async for event in view:
            seen.append(event)
            if event.kind == kind and task_id in (None, event.task_id):
                return seen
    raise AssertionError(f"the view ended before {kind} of {task_id}: {seen}")


def test_a_view_sees_a_submitted_task_live_in_commit_order(tmp_path: Path) -> None:
    async def main() -> None:
        async with open_kernel(_home(tmp_path)) as kernel:
            operator = Operator(kernel)
            await operator.submit("note", "before the view")
            await operator.wait_idle()
            view = await operator.subscribe()  # from now: the task above is not shown
            watching = asyncio.create_task(_until(view, None, "TaskCompleted"), name="watch")
            await asyncio.sleep(0.1)
            assert not watching.done()  # nothing was committed: it waits
            submitted = await operator.submit("note", "buy milk")
            seen = await watching
            assert [e.kind for e in seen] == LIFE
            assert {e.task_id for e in seen} == {submitted.task_id}
            assert [e.seq for e in seen] == list(range(seen[0].seq, seen[0].seq + 3))
            assert wire_json(seen[-1])["body"]["state"] == seen[-1].body["state"] == "Completed"

    asyncio.run(main())


def test_a_view_resumed_from_a_number_gets_exactly_the_rest_then_the_new_ones(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with open_kernel(_home(tmp_path)) as kernel:
            operator = Operator(kernel)
            for n in range(3):
                await operator.submit("note", f"note {n}")
            await operator.wait_idle()
            history = await operator.events(0, limit=1000)
            middle = history[len(history) // 2].seq
            rest = [e.seq for e in history if e.seq > middle]
            view = await operator.subscribe(middle)
            assert [(await anext(view)).seq for _ in rest] == rest
            later = await operator.submit("note", "one more")
            seen = await _until(view, later.task_id, "TaskCompleted")
            assert [(e.kind, e.task_id) for e in seen] == [(k, later.task_id) for k in LIFE]
            assert seen[0].seq == rest[-1] + 1  # nothing skipped, nothing twice
            await view.aclose()
            with pytest.raises(BadRequest, match="after"):
                await operator.subscribe(-1)

    asyncio.run(main())


def test_a_view_of_one_task_is_given_only_its_events(tmp_path: Path) -> None:
    async def main() -> None:
        async with open_kernel(_home(tmp_path)) as kernel:
            operator = Operator(kernel)
            asking = await operator.submit("run_command", "echo hello")
            await operator.wait_idle()
            view = await operator.subscribe(0, task_id=asking.task_id[:8])
            other = await operator.submit("note", "not this one")
            await operator.wait_idle()
            (question,) = (await operator.questions()).approvals
            await operator.answer(question.approval_id, "approve")
            seen = await _until(view, asking.task_id, "TaskCompleted")
            assert {e.task_id for e in seen} == {asking.task_id}
            kinds = [e.kind for e in seen]
            assert kinds[:3] == ["TaskCreated", "TaskStarted", "UserInputNeeded"]
            assert "TaskResumed" in kinds
            assert other.task_id not in {e.task_id for e in seen}
            await view.aclose()
            with pytest.raises(UnknownTask):
                await operator.subscribe(task_id="0000dead")

    asyncio.run(main())


def test_closing_a_view_or_stopping_the_kernel_ends_it_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with open_kernel(_home(tmp_path)) as kernel:
            operator = Operator(kernel)
            before = asyncio.all_tasks()

            # closed where it waits: the task iterating it is cancelled
            waiting = await operator.subscribe()
            reading = asyncio.create_task(_until(waiting, None, "TaskCompleted"), name="read")
            await asyncio.sleep(0.1)
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            with pytest.raises(StopAsyncIteration):
                await anext(waiting)

            # closed between two events
            await operator.submit("note", "buy milk")
            await operator.wait_idle()
            view = await operator.subscribe(0)
            assert (await anext(view)).kind == "TaskCreated"
            await view.aclose()
            with pytest.raises(StopAsyncIteration):
                await anext(view)
            assert asyncio.all_tasks() == before

            # the kernel stops: a view waiting for the next event ends, with no error
            last = await operator.subscribe()
            until_stop = asyncio.create_task(_all(last), name="until-stop")
            await asyncio.sleep(0.1)
        async with asyncio.timeout(10):
            assert await until_stop == []
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())


async def _all(view: AsyncIterator[BusEventView]) -> list[BusEventView]:
    return [event async for event in view]
