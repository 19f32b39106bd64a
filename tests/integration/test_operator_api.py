"""The operator API on a real kernel: the verbs every surface calls and the records they
return, read back without a kernel, and the same verbs through the control socket."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pfar import Home, HomeReader, Operator, init_home, open_kernel
from pfar.adapters.cli import read_commands
from pfar.cli.client import RemoteError
from pfar.errors import PfarError, TaskStateRefused, UnknownTask
from pfar.journal import ApprovalStatus, TaskState
from pfar.journal.sessions import SessionStatus
from pfar.kernel.api import Submitted
from pfar.kernel.api.wire import wire_json

from ..support import pfar, running_kernel, said


def _home(tmp_path: Path) -> Home:
    home = Home(tmp_path / "home")
    init_home(home)  # the example templates: note (write, read), run_command (asks first)
    return home


def test_a_task_through_the_operator_api_and_its_timeline_without_a_kernel(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path)

    async def main() -> str:
        async with open_kernel(home) as kernel:
            operator = Operator(kernel)
            assert operator.ping().boot_id == kernel.boot_id
            submitted = await operator.submit("note", "buy milk", event_id="mail-1")
            assert (submitted.template_id, submitted.redacted) == ("note", ())
            await operator.wait_idle()
            again = await operator.submit("note", "buy milk", event_id="mail-1")
            assert again.task_id == submitted.task_id  # the same event: one task
            summary = await operator.task(submitted.task_id[:8])
            assert (summary.state, summary.current_step, summary.steps) == (
                TaskState.Completed,
                2,
                2,
            )
            assert await operator.tasks() == [summary]
            assert await operator.tasks([TaskState.Failed]) == []
            assert (await operator.status()).counts == {"Completed": 1}
            timeline = await operator.timeline(submitted.task_id)
            events = [entry.words for entry in timeline.entries]
            assert events[0] == "created from note"
            assert "step 1/2 file.write (save the note): completed" in events
            assert "now Completed" in events
            assert [step.tool for step in timeline.steps] == ["file.write", "file.read"]
            assert "pfar task" in await operator.trace(submitted.task_id)
            with pytest.raises(UnknownTask, match="`pfar tasks` lists them"):
                await operator.timeline("0000dead")
            return submitted.task_id

    task_id = asyncio.run(main())
    # no kernel now: a HomeReader reads the same vault, and the CLI prints what it reads
    with HomeReader(home) as reader:
        timeline = asyncio.run(reader.timeline(task_id))
        assert timeline.task.state is TaskState.Completed
        shown = pfar(home, "task", "show", task_id[:8], "--json")
        assert shown.returncode == 0, said(shown)
        assert json.loads(shown.stdout) == wire_json(timeline)
        listed = pfar(home, "approvals", "--all", "--json")
        assert json.loads(listed.stdout) == wire_json(asyncio.run(reader.questions(answered=True)))


async def _two_asking(operator: Operator) -> tuple[Submitted, Submitted]:
    """Two tasks parked on the owner's approval of their command."""
    first = await operator.submit("run_command", "echo hello")
    second = await operator.submit("run_command", "echo never")
    await operator.wait_idle()
    return first, second


def test_questions_answers_and_the_owners_hold(tmp_path: Path) -> None:
    home = _home(tmp_path)

    async def main() -> None:
        async with open_kernel(home) as kernel:
            operator = Operator(kernel)
            first, second = await _two_asking(operator)
            questions = await operator.questions()
            assert {a.task_id for a in questions.approvals} == {first.task_id, second.task_id}
            assert questions.credentials == ()
            (asked,) = [a for a in questions.approvals if a.task_id == first.task_id]
            assert await operator.approval(asked.approval_id[:8]) == asked

            answered = await operator.answer(asked.approval_id[:8], "approve")
            assert (answered.status, answered.changed) == (ApprovalStatus.approved, True)
            assert answered.task_id == first.task_id
            await operator.wait_idle()
            assert (await operator.task(first.task_id)).state is TaskState.Completed
            again = await operator.answer(asked.approval_id, "approve")
            assert again.changed is False  # answered once: nothing changes

            held = await operator.cancel(second.task_id)
            assert (held.state, held.outcome) == (TaskState.Cancelled, "cancelled")
            assert len(held.withdrawn) == 1
            with pytest.raises(TaskStateRefused, match="nothing was changed"):
                await operator.pause(second.task_id)
            with pytest.raises(TaskStateRefused, match="nothing was changed"):
                await operator.resume(second.task_id)
            assert (await operator.questions()).approvals == ()
            every = (await operator.questions(answered=True)).approvals
            assert {a.status for a in every} == {ApprovalStatus.approved, ApprovalStatus.withdrawn}

    asyncio.run(main())


def test_secrets_sessions_and_workflows_through_the_operator_api(tmp_path: Path) -> None:
    home = _home(tmp_path)
    project = tmp_path / "project"
    project.mkdir()

    async def main() -> None:
        async with open_kernel(home) as kernel:
            operator = Operator(kernel)
            assert operator.set_secret("mail_password", "hunter2-correct-horse").name == (
                "mail_password"
            )
            noted = await operator.submit("note", "my password is hunter2-correct-horse")
            assert noted.redacted  # the task got a marker in the secret's place
            await operator.wait_idle()

            session = await operator.new_session(str(project), "chat-7")
            assert session.status is SessionStatus.CREATED
            assert await operator.sessions() == [session]
            assert await operator.session(session.session_id[:8]) == session
            ended = await operator.terminate_session(session.session_id)
            assert ended.status is SessionStatus.TERMINATED
            assert await operator.sessions(SessionStatus.CREATED) == []

            check = await operator.workflow_status(str(project))
            assert (check.state, check.decision) == ("no_trace", None)
            with pytest.raises(PfarError, match="does not exist"):
                await operator.workflow_status(str(tmp_path / "nowhere"))

    asyncio.run(main())
    with HomeReader(home) as reader:
        (task,) = asyncio.run(reader.tasks())
        assert "hunter2" not in json.dumps(wire_json(asyncio.run(reader.timeline(task.task_id))))


def test_the_control_socket_runs_the_same_verbs_and_refuses_bad_fields_by_name(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path)
    with running_kernel(home) as k:
        task_id = k.request("submit", template="run_command", text="echo hi")["task_id"]
        k.request("wait_idle")
        listed = k.request("tasks", states=["AwaitingApproval"], limit=5)
        assert [t["task_id"] for t in listed] == [task_id]
        questions = k.request("approvals")
        assert questions == json.loads(pfar(home, "approvals", "--json").stdout)
        (approval,) = questions["approvals"]
        assert k.request("approval_show", approval_id=approval["approval_id"][:8]) == approval
        refusals = [
            ({"approval_id": 7, "decision": "approve"}, "approval_id: must be a string, not int"),
            ({"approval_id": approval["approval_id"]}, "decision: is required"),
        ]
        for fields, message in refusals:
            with pytest.raises(RemoteError) as refused:
                k.request("answer", **fields)
            assert (refused.value.remote_code, str(refused.value)) == ("bad_request", message)
        with pytest.raises(RemoteError, match=r"^states\[0\]: 'Done' is not one of "):
            k.request("tasks", states=["Done"])
        with pytest.raises(RemoteError, match=r"^op: unknown op 'launch' \(known: ping, "):
            k.request("launch")
        with pytest.raises(RemoteError, match=r"^value: must be a string, not list"):
            k.request("secret_set", name="x", value=["not", "a", "string"])
        shown_error = (
            "denied by the owner: Task Run a command wants to run shell.run (step 1 of 1): "
            "the template requires approval for shell.run."
        )
        assert k.request("answer", approval_id=approval["approval_id"], decision="deny") == {
            "approval_id": approval["approval_id"],
            "status": "denied",
            "decision": "deny",
            "changed": True,
            "task_id": task_id,
            "task_state": "Failed",  # what the answer did: a denial fails this template's task
            "task_error": shown_error,
        }
        k.request("wait_idle")
        shown = k.request("task_show", task_id=task_id)
        assert shown["task"]["state"] == "Failed"
        assert shown == json.loads(pfar(home, "task", "show", task_id, "--json").stdout)
        assert k.request("sessions") == []
        assert k.request("status")["counts"] == {"Failed": 1}


def test_the_stdin_adapter_acts_through_the_operator_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)

    async def main() -> None:
        async with open_kernel(home) as kernel:
            operator = Operator(kernel)
            asked, dropped = await _two_asking(operator)
            (approval,) = [
                a for a in (await operator.questions()).approvals if a.task_id == asked.task_id
            ]
            lines = [
                "submit note call the plumber",
                f"approve {approval.approval_id[:8]}",
                f"approve {approval.approval_id[:8]}",
                f"cancel {dropped.task_id[:8]}",
                "tasks",
                "launch rockets",
            ]
            stream = asyncio.StreamReader()
            stream.feed_data("".join(line + "\n" for line in lines).encode())
            stream.feed_eof()
            await read_commands(operator, stream)
            await operator.wait_idle()

    asyncio.run(main())
    printed = capsys.readouterr().out
    assert "submitted (note)" in printed
    assert "approved (already)" in printed  # the second approve changed nothing
    assert "Cancelled\n  withdrawn: question" in printed
    assert "commands: submit TEMPLATE TEXT" in printed
    with HomeReader(home) as reader:
        states = sorted((t.template_id, t.state.value) for t in asyncio.run(reader.tasks()))
    assert states == [
        ("note", "Completed"),
        ("run_command", "Cancelled"),
        ("run_command", "Completed"),
    ]
