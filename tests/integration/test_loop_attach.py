"""`pfar attach`: a loop task's output live, through the operator API and through the
real command against a real kernel process. Detaching stops nothing, and what the
task did while nobody watched is shown on the next attach."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from pfar.journal import TaskState
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.kernel.api.attach import Shown
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply

from ..support import make_home, running_kernel, wait_for


def _model(request: ChatRequest) -> ChatResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        call = ToolCall("w", "file.write", {"path": "a.txt", "content": "hi"})
        return reply(request, "Writing a.txt.", [call])
    return reply(request, f"Done ({request.messages[-1].text or 'written'}).")


def test_a_viewer_sees_streamed_text_turns_and_states_and_then_only_what_is_new(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = '[loop]\ntools = ["file.write"]\nalways_allow = ["file.write"]\n'
    home = make_home(tmp_path / "home", config=config, examples=True)

    async def watch(op: Operator, task_id: str, until: TaskState) -> list[Shown]:
        seen: list[Shown] = []
        viewer = await op.attach(task_id)
        async for item in viewer:
            seen.append(item)
            if item.kind == "state" and item.text == until.value:
                break
        await viewer.aclose()  # type: ignore[attr-defined]
        return seen

    async def main() -> None:
        async with open_kernel(home, model=ScriptedChatModel(_model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("write it", str(work))
            task_id = started.task_id
            first = await watch(op, task_id, TaskState.WaitingForUser)
            texts = [s.text for s in first]
            assert texts[0] == "you: write it"
            assert any("file.write #1" in t for t in texts)
            assert any(t.startswith("results: #1") for t in texts)
            assert texts[-1] == "WaitingForUser"
            assert (work / "a.txt").read_text() == "hi"

            # while nobody watches, the owner answers and the model replies
            await op.send(task_id, "thanks")
            await op.wait_idle()
            again = await watch(op, task_id, TaskState.WaitingForUser)
            turns = [s.text for s in again if s.kind == "turn"]
            assert turns == ["you: thanks", "model: Done (thanks)."]  # only what is new

            everything = await op.attach(task_id, from_start=True)
            first_item = await everything.__anext__()  # type: ignore[attr-defined]
            assert first_item.text == "you: write it"
            await everything.aclose()  # type: ignore[attr-defined]

            await op.send(task_id, "/done")
            await op.wait_idle()
            ended = [s async for s in await op.attach(task_id)]
            assert ended[-1] == Shown("ended", "Completed")

            # a pipeline task has no conversation: its timeline is what a viewer sees
            submitted = await op.submit("note", "buy milk")
            await op.wait_idle()
            note = [s async for s in await op.attach(submitted.task_id)]
            assert note[0].text.endswith("created from note")
            assert note[-1].kind == "ended"  # (this home's model speaks only to loops)

    asyncio.run(main())


def test_pfar_attach_streams_from_a_running_kernel_and_ctrl_c_detaches(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        text = "Counting to three."
        tool_calls = [ { name = "shell.run", input = { argv = ["sh", "-c", "sleep 2; echo 3"] } } ]

        [[turns]]
        text = "It said $last"
        """
    )
    config = '[loop]\ntools = ["shell.run"]\nalways_allow = ["shell.run"]\n'
    home = make_home(tmp_path / "home", script=script, config=config)
    env = {**os.environ, "PFAR_HOME": str(home.root)}
    with running_kernel(home) as k:
        task_id = k.request("loop", prompt="count", directory=str(work))["task_id"]

        # what a viewer printed goes to files, so the test can see it shown before it acts
        # (a fixed wait could end before a `pfar attach` had started on a loaded machine)
        seen = {"out": tmp_path / "viewer.out", "err": tmp_path / "viewer.err"}

        def attach() -> subprocess.Popen[str]:
            with open(seen["out"], "w") as out, open(seen["err"], "w") as err:
                return subprocess.Popen(
                    [sys.executable, "-m", "pfar", "attach", task_id],
                    env=env,
                    stdout=out,
                    stderr=err,
                    text=True,
                )

        def shown(what: str, text: str) -> bool:
            return text in seen[what].read_text()

        def ended(viewer: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
            viewer.wait(timeout=timeout)
            return seen["out"].read_text(), seen["err"].read_text()

        def state() -> str:
            return str(k.request("task_show", task_id=task_id)["task"]["state"])

        viewer = attach()
        wait_for(lambda: state() == "WaitingForUser", what="the model's turn to end")
        wait_for(
            lambda: shown("out", "It said") and shown("err", "[WaitingForUser]"),
            what="the viewer to show the reply and the state",
        )
        viewer.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = ended(viewer, timeout=30)
        assert viewer.returncode == 0, err
        assert "detached; the task goes on" in err
        assert out.splitlines()[0] == "you: count"
        assert "Counting to three." in out and "It said" in out
        assert out.count("It said") == 1  # streamed once, not shown again with its turn
        assert "[WaitingForUser] waits for you" in err

        # while nobody watches, the owner answers and the model replies
        k.request("send", task_id=task_id, text="again")
        wait_for(lambda: state() == "WaitingForUser", what="the reply")
        viewer = attach()
        wait_for(lambda: shown("out", "you: again"), what="the viewer to catch up")
        k.request("send", task_id=task_id, text="/done")
        out, err = ended(viewer, timeout=60)  # the task's end ends the stream
        assert viewer.returncode == 0, err
        assert out.splitlines()[0] == "you: again"  # only what is new
        assert "Counting to three." not in out
        assert "task ended: Completed" in err
