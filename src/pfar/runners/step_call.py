"""A step as a runner hands it to the step executor (steps.py), and what it gets back.

A runner says what differs (`StepRules`: its approval rule, trusted hosts,
credentials and timeout) and where the step sits (`StepCall`), and decides what
an outcome means for its task: the pipeline fails the task on a tool error,
the agentic loop hands the error back to its model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..journal import Semantics, StepRecord, TaskRecord
from ..journal.turns import SkillSeen
from ..policy.approvals import ApprovalRule
from ..tools.base import Credential, Resource
from ..tools.hosts import HostPolicy
from ..tools.protected import Protection
from .step_rules import Ask


@dataclass(frozen=True, slots=True)
class StepCall:
    """One step of a task: its number (0-based), its tool and arguments, and how the
    owner's messages name it (`title` of the task, `where`: "step 2 of 5")."""

    step: int
    tool: str
    args: dict[str, Any]
    title: str
    where: str
    # what the task's progress becomes once the step is done
    next_step: int
    last: bool


@dataclass(frozen=True, slots=True)
class StepRules:
    """What a runner's template (or its owner's settings) says about its steps."""

    approval: ApprovalRule
    step_seconds: float
    trusted_key_hosts: frozenset[str] = frozenset()
    credentials: Callable[[str], Sequence[Credential]] = lambda tool: ()
    approval_timeout: float | None = None
    # the runner's own rule in place of `approval`, asked for every call (reads too):
    # the question to ask before `tool` runs with `args`, or None to let it run
    ask: Callable[[str, dict[str, Any], Semantics], Ask | None] | None = None
    # the directory the tools work in (default: the task's workspace in the home)
    workspace: Path | None = None
    # holds the resources a call declares while it runs (orchestration's locks); none
    # are taken without it
    hold: Callable[[str, tuple[Resource, ...]], AbstractAsyncContextManager[None]] | None = None
    # paths the file tools refuse and leave out (the loop's protected paths); None: none
    protection: Protection | None = None
    # where a URL may go (the loop's [loop.policy]; tools/hosts.py), and the runner's
    # word on a redirect to a new host: raises ToolFailed saying why it is not followed
    hosts: HostPolicy | None = None
    redirected: Callable[[str], Awaitable[None]] | None = None
    # the skills the task was given (a loop task's settings), for the Skill tool
    skills: tuple[SkillSeen, ...] = ()


@dataclass(frozen=True, slots=True)
class Done:
    """The step's outcome is journaled; `task` is the task as that commit left it."""

    task: TaskRecord
    kind: Literal["done"] = "done"


@dataclass(frozen=True, slots=True)
class Parked:
    """The task waits on the owner (a question or a credential prompt); nothing ran."""

    kind: Literal["parked"] = "parked"


@dataclass(frozen=True, slots=True)
class ToolErrored:
    """The tool failed, timed out or raised: `error` (redacted) is all the runner needs to
    journal the failure its way; `record` is the step's row as it failed."""

    record: StepRecord
    error: str
    kind: Literal["errored"] = "errored"
    # False: the tool never ran (its locks were not to be had, a hook stopped it), so
    # running it again repeats nothing
    ran: bool = True


StepOutcome = Done | Parked | ToolErrored
