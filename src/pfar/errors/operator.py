"""The owner's requests to the kernel: refused, malformed, or with no kernel to take them."""

from __future__ import annotations

from .base import PfarError


class BadRequest(PfarError, ValueError):
    """A request (control socket or API call) whose field has the wrong type or shape
    (a ValueError too: callers that caught the untyped one keep working)."""

    code = "bad_request"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


class NotALoopTask(BadRequest):
    """A loop task's view (its conversation) asked of a pipeline or workflow task,
    which has none: its timeline tells what it did."""

    code = "not_a_loop_task"

    def __init__(self, task_id: str, kind: str) -> None:
        super().__init__(
            "task_id",
            f"{task_id} is a {kind} task; only a loop task has a conversation "
            "(`pfar task show` tells the timeline of any task)",
        )
        self.task_id, self.kind = task_id, kind


class BadReply(PfarError):
    """A kernel's answer that does not fit the record its op returns: a client and a
    kernel of different versions, most likely. Nothing is retried."""

    code = "bad_reply"

    def __init__(self, op: str, record: str, field: str, problem: str) -> None:
        super().__init__(
            f"the kernel's answer to {op!r} is not a {record} ({field}: {problem}); "
            "is the running kernel the same version as this `pfar`?"
        )
        self.op, self.record, self.field, self.problem = op, record, field, problem


class NotTheOwner(PfarError):
    """A control-socket request that does not come from the owner's `pfar` command: a
    process pfar started (a task's command, a step, an agent, a hook), another user,
    or a request without this boot's token."""

    code = "not_the_owner"

    def __init__(self, why: str) -> None:
        super().__init__(
            f"refused: {why}. The control socket takes requests only from the owner's "
            "`pfar` command (docs/security.md)"
        )
        self.why = why


class KernelNotRunning(PfarError):
    code = "kernel_not_running"

    def __init__(self, home: str) -> None:
        super().__init__(f"no kernel is running on {home}; start one with `pfar run`")
        self.home = home


class KernelNotReady(KernelNotRunning):
    """A kernel holds the home but its control socket is not (or no longer) there."""

    code = "kernel_not_ready"

    def __init__(self, home: str) -> None:
        PfarError.__init__(
            self,
            f"the kernel on {home} is not answering on its control socket yet "
            "(it is starting or stopping); try again in a moment",
        )
        self.home = home


class ShuttingDown(PfarError):
    code = "shutting_down"

    def __init__(self) -> None:
        super().__init__(
            "the kernel is shutting down and accepts no new work; try again when it has stopped"
        )


class AnswerDoesNotFit(BadRequest):
    """The owner's answer is not one the question offers; nothing was changed."""

    code = "answer_does_not_fit"

    def __init__(self, approval_id: str, answer: str, options: list[str]) -> None:
        problem = f"approval {approval_id[:8]} offers {', '.join(options)}; got {answer!r}"
        PfarError.__init__(self, f"{problem}; nothing was changed")
        self.field, self.problem = "decision", problem
        self.approval_id, self.answer, self.options = approval_id, answer, options
