"""A loop task's conversation for a view that only looks (`conversation`,
`follow_conversation`, the `conversation` op): its turns in order as typed records,
those after a number, the model's text as it streams, and no viewer's mark moved (a
`pfar attach` afterwards is shown everything as new)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from pfar.cli.client import RemoteError
from pfar.errors import BadRequest, NotALoopTask, UnknownTask
from pfar.journal import TaskState
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.kernel.api.attach import mark_key
from pfar.kernel.api.conversation_records import (
    ModelSaid,
    StateChange,
    Streamed,
    ToolResults,
    UserSaid,
)
from pfar.kernel.api.requests import CONVERSATION
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.llm.events import EventSink, TextDelta

from ..support import make_home, running_kernel

CONFIG = '[loop]\ntools = ["file.write"]\nalways_allow = ["file.write"]\n'


def _model(request: ChatRequest) -> ChatResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        call = ToolCall("w", "file.write", {"path": "a.txt", "content": "<b>hi</b>"})
        return reply(request, "Writing a.txt.", [call])
    return reply(request, "Done: <script>alert(1)</script>")


class _Held:
    """A model that streams the start of its answer, then waits to be let go: what a
    view follows while a model call runs."""

    def __init__(self) -> None:
        self.inner = ScriptedChatModel(_model)
        self.go = asyncio.Event()

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse:
        if on_event is not None and request.messages[-1].role == "user":
            on_event(TextDelta("Writing"))
        await self.go.wait()
        return await self.inner.chat(request, on_event=on_event)


def test_the_conversation_is_read_in_order_after_a_number_and_moves_no_mark(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home = make_home(tmp_path / "home", config=CONFIG, examples=True)

    async def main() -> None:
        async with open_kernel(home, model=ScriptedChatModel(_model)) as kernel:
            op = Operator(kernel)
            task_id = (await op.start_loop("write it", str(work))).task_id
            await op.wait_idle()

            whole = await op.conversation(task_id[:8])  # a prefix is enough
            assert whole.task_id == task_id
            assert whole.state is TaskState.WaitingForUser
            assert [t.seq for t in whole.turns] == [0, 1, 2, 3]
            asked, answer, results, done = whole.turns
            assert asked == UserSaid(0, asked.at, "write it", "prompt")
            assert isinstance(answer, ModelSaid) and answer.text == "Writing a.txt."
            (call,) = answer.calls
            assert (call.name, call.step) == ("file.write", 0)
            assert call.arguments == {"path": "a.txt", "content": "<b>hi</b>"}
            assert isinstance(results, ToolResults)
            assert [(r.step, r.is_error) for r in results.results] == [(0, False)]
            assert isinstance(done, ModelSaid)
            assert done.text == "Done: <script>alert(1)</script>"
            assert whole.last_seq == 3

            later = await op.conversation(task_id, after=1)
            assert [t.seq for t in later.turns] == [2, 3]
            assert (later.after, later.last_seq) == (1, 3)
            none_new = await op.conversation(task_id, after=3)
            assert (none_new.turns, none_new.last_seq) == ((), 3)

            # the op's reply is the record again on the client's side
            body = await CONVERSATION.run(op, CONVERSATION.parse({"task_id": task_id}))
            assert CONVERSATION.reply.parse(body, "conversation") == whole

            # nothing was marked seen: attach is shown the whole conversation as new
            assert await kernel.journal.adapters.get(mark_key(task_id)) is None
            viewer = await op.attach(task_id)
            first = await viewer.__anext__()  # type: ignore[attr-defined]
            await viewer.aclose()  # type: ignore[attr-defined]
            assert first.text == "you: write it"

            with pytest.raises(BadRequest) as bad:
                await op.conversation(task_id, after=-2)
            assert bad.value.field == "after"
            note = (await op.submit("note", "buy milk")).task_id
            with pytest.raises(NotALoopTask) as refused:
                await op.conversation(note)
            assert refused.value.code == "not_a_loop_task" and note in str(refused.value)
            assert "pipeline" in str(refused.value)
            with pytest.raises(UnknownTask) as unknown:
                await op.conversation("feedface")
            assert unknown.value.code == "unknown_task"

    asyncio.run(main())


def test_a_view_follows_streamed_text_then_the_turns_and_states_moving_nothing(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home = make_home(tmp_path / "home", config=CONFIG, examples=True)
    model = _Held()

    async def main() -> None:
        async with open_kernel(home, model=model) as kernel:
            op = Operator(kernel)
            task_id = (await op.start_loop("write it", str(work))).task_id
            followed = await op.follow_conversation(task_id)
            seen: list[object] = []
            async for item in followed:
                seen.append(item)
                if isinstance(item, Streamed):
                    model.go.set()  # the answer streamed before it was journaled
                if item == StateChange(TaskState.WaitingForUser):
                    break
            await followed.aclose()  # type: ignore[attr-defined]
            kinds = [getattr(i, "kind", None) for i in seen]
            assert kinds[:3] == ["user", "state", "text"]
            assert seen[2] == Streamed("Writing")
            turns = [i for i in seen if not isinstance(i, Streamed | StateChange)]
            assert [t.seq for t in turns] == [0, 1, 2, 3]  # each once, in order
            assert seen[-1] == StateChange(TaskState.WaitingForUser)

            # a view that comes back after seq 1 is given only what followed it
            again = await op.follow_conversation(task_id, after=1)
            first = await again.__anext__()  # type: ignore[attr-defined]
            await again.aclose()  # type: ignore[attr-defined]
            assert first.seq == 2
            assert await kernel.journal.adapters.get(mark_key(task_id)) is None

            with pytest.raises(UnknownTask):
                await op.follow_conversation("feedface")

    asyncio.run(main())


def test_the_conversation_op_over_the_control_socket(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        text = "Writing."
        tool_calls = [ { name = "file.write", input = { path = "a.txt", content = "x" } } ]

        [[turns]]
        text = "Written."
        """
    )
    home = make_home(tmp_path / "home", script=script, config=CONFIG, examples=True)
    with running_kernel(home) as k:
        task_id = k.request("loop", prompt="write", directory=str(work))["task_id"]
        k.request("wait_idle")
        got = CONVERSATION.reply.parse(k.request("conversation", task_id=task_id), "conversation")
        assert [t.kind for t in got.turns] == ["user", "assistant", "results", "assistant"]
        after = k.request("conversation", task_id=task_id, after=2)
        assert [t["seq"] for t in after["turns"]] == [3]
        note = k.request("submit", template="note", text="buy milk")["task_id"]
        with pytest.raises(RemoteError) as refused:
            k.request("conversation", task_id=note)
        assert refused.value.remote_code == "not_a_loop_task"
        with pytest.raises(RemoteError) as unknown:
            k.request("conversation", task_id="feedface")
        assert unknown.value.remote_code == "unknown_task"
        with pytest.raises(RemoteError) as bad:
            k.request("conversation", task_id=task_id, after="1")
        assert bad.value.remote_code == "bad_request"
