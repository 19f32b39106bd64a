"""The step executor: one tool call of a task, made durable, for every runner.

What every runner needs of a step lives here once: a step the owner chose to
skip is recorded as skipped; a step the journal already knows is replayed,
checked or asked about (persistence spec §7.3, `should_retry_step`) instead of
run blindly; a write waits for the owner's approval where the runner's rules
ask for one, and runs only with exactly the arguments approved; a credential
the step needs parks the task on a prompt; a write's intent is journaled before
the tool runs; the tool runs with its idempotency key, its credentials and a
timeout; its result (redacted) is journaled with the task's progress.

A runner says what differs (`StepRules`: its approval rule, trusted hosts,
credentials and timeout) and where the step sits (`StepCall`), and decides what
an outcome means for its task: the pipeline fails the task on a tool error,
the agentic loop hands the error back to its model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import ResourceLocked, ToolError, ToolTimeout, VaultError
from ..hooks import HookPoint, Verdict
from ..journal import Semantics, StepRecord, StepStatus, TaskRecord, TaskState
from ..journal.payloads import Executing, Paused, Payload, Synthesizing
from ..journal.records import Idempotency, args_digest, now_rfc3339
from ..policy.approvals import ApprovalRule, approval_needed
from ..timeouts import bounded
from ..tools.admin import PromptCredential
from ..tools.base import Credential, Resource, Tool, ToolContext, resources_of
from ..tools.hosts import HostPolicy
from ..tools.processes import identity
from ..tools.protected import Protection
from ..tools.sandbox import Sandbox
from . import hooking
from .asking import ask_owner, park_credential
from .services import Services
from .step_rules import Ask, StepRecovery, should_retry_step
from .summaries import summarizer

IN_DOUBT_OPTIONS = ["retry", "skip", "fail"]


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


StepOutcome = Done | Parked | ToolErrored


async def run_step(
    task: TaskRecord, call: StepCall, rules: StepRules, svc: Services, *, fresh: bool
) -> StepOutcome:
    """Run `call` for `task` (`fresh`: the task's last commit was its previous step's,
    so no record of this one can exist yet)."""
    i = call.step
    answered = task.payload if isinstance(task.payload, Executing) else Executing()
    if answered.skip_step == i:
        skipped = {"skipped": "by the owner's decision"}
        rec = _record(
            task, call, Semantics.Write, Idempotency.none, StepStatus.skipped, skipped, "Extracted"
        )
        return await _finish(task, call, svc, rec)

    if call.tool not in svc.tools:
        await ask_owner(
            task,
            svc,
            action_type="tool_missing",
            step=i,
            tool=call.tool,
            options=["skip", "fail"],
            description=(
                f"Task {call.title} planned tool {call.tool!r} for {call.where}, but no "
                "such tool exists any more. Skip the step or fail the task?"
            ),
        )
        return Parked()
    tool = svc.tools.get(call.tool)
    # PreToolUse (seed 001, 4.4), before anything is asked or journaled about the call:
    # the owner is asked about, and the step runs, what the hooks left of it; the
    # verdict is kept, so a resumed step has the same arguments
    pre = await hooking.decide(
        svc,
        task.task_id,
        call.title,
        HookPoint.PreToolUse,
        f"step:{i}",
        {"tool": call.tool, "input": call.args, "where": call.where},
    )
    if pre.blocked:
        return _blocked(task, call, tool.semantics(call.args), pre.blocked)
    if "input" in pre.changes:
        call = replace(call, args=pre.changes["input"])
    semantics = tool.semantics(call.args)
    idem = _idempotency(tool, call.args, rules)
    workdir = rules.workspace or svc.workspace(task.task_id)
    ctx = ToolContext(
        task.task_id,
        i,
        f"{task.task_id}:{i}",
        workdir,
        svc.secret,
        _process_recorder(svc, task.task_id, i),
        credentials=tuple(rules.credentials(call.tool)),
        summarize=summarizer(svc, task.task_id, rules.step_seconds),
        sandbox=_sandbox(svc, task.task_id, workdir),
        protection=rules.protection,
        hosts=rules.hosts,
        redirected=rules.redirected,
    )

    record = None if fresh else await svc.journal.tasks.step(task.task_id, i)
    if record is not None and answered.retry_step != i:
        # Resuming at a step the journal already knows: spec §7.3.
        rule = should_retry_step(record, semantics, idem)
        if rule is StepRecovery.SkipWithCachedResult:
            return await _finish(task, call, svc, record)
        if rule is StepRecovery.CheckEffect:
            found = await tool.check(call.args, ctx)
            if found is not None:
                done = StepStatus.completed
                rec = _record(task, call, semantics, idem, done, found, tool.result_label)
                return await _finish(task, call, svc, rec)
        elif rule is StepRecovery.RequireOwnerConfirmation:
            await ask_owner(
                task,
                svc,
                action_type="write_in_doubt",
                step=i,
                tool=call.tool,
                options=IN_DOUBT_OPTIONS,
                description=(
                    f"I was interrupted while executing '{call.tool}'. "
                    "It may have already completed. Should I retry it? "
                    f"(task {call.title}, {call.where})"
                ),
                preview=call.args,
            )
            return Parked()

    missing = missing_secret(ctx, call.tool, call.args)
    if missing is not None:
        # the template sends a secret the vault lacks: ask for it (AwaitingCredential,
        # re-sent after a restart); given, the step runs with it (asked
        # before any approval, so a grant is not spent on a call that cannot run)
        await park_credential(task, svc, i, secret_prompt(missing, call))
        return Parked()

    # a read is asked about only by a runner with questions of its own (the loop's)
    asks = rules.ask is not None or semantics is Semantics.Write
    question = await _question(task, call, semantics, rules, answered, svc) if asks else None
    if question is not None:
        hooked = await _permission(task, call, question.reason, svc)
        if hooked.blocked:
            return _blocked(task, call, semantics, hooked.blocked)
        if not hooked.allowed:
            ask = question.ask
            await ask_owner(
                task,
                svc,
                action_type=ask.action_type,
                step=i,
                tool=call.tool,
                options=list(ask.options),
                taint=question.taint,
                description=ask.description,
                preview=call.args,
                on_deny=ask.on_deny,
                timeout=ask.timeout,
            )
            return Parked()

    if isinstance(tool, PromptCredential) and await tool.check(call.args, ctx) is None:
        await park_credential(task, svc, i, call.args)
        return Parked()

    # the resource-lock seam (seed 001, 4.3): a runner that locks holds what the call
    # touches, in sorted order, from its start's journal entry to its result's
    if rules.hold is None:  # nothing to hold: no context to enter and leave on every step
        return await _run(task, call, rules, svc, tool, ctx, semantics, idem)
    try:
        async with rules.hold(f"{task.task_id}:{i}", resources_of(tool, call.args, ctx.workspace)):
            return await _run(task, call, rules, svc, tool, ctx, semantics, idem)
    except ResourceLocked as exc:  # its locks were not to be had: the call's result says so
        error = f"{call.where}: {exc}"
        failed = _record(
            task,
            call,
            semantics,
            idem,
            StepStatus.failed,
            None,
            "Extracted",
            started_at=now_rfc3339(),
            completed_at=now_rfc3339(),
            error=error,
        )
        return ToolErrored(failed, error)


async def _run(
    task: TaskRecord,
    call: StepCall,
    rules: StepRules,
    svc: Services,
    tool: Tool,
    ctx: ToolContext,
    semantics: Semantics,
    idem: Idempotency,
) -> StepOutcome:
    """Journal a write's intent, run the tool under its timeout, journal what it did."""
    started = now_rfc3339()
    if semantics is Semantics.Write:
        label = tool.result_label
        await svc.journal.tasks.step_started(
            _record(
                task, call, semantics, idem, StepStatus.started, None, label, started_at=started
            )
        )
    seconds = rules.step_seconds
    try:
        tool.validate(call.args)
        result = await bounded(tool.run(call.args, ctx), seconds)
    except TimeoutError:
        error = f"{call.where}: {ToolTimeout(call.tool, seconds)}"
    except ToolError as exc:
        error = svc.redactor.text(f"{call.where}: {exc}")
    except (VaultError, asyncio.CancelledError):
        raise
    except Exception as exc:  # a tool's bug fails its step, never the kernel
        error = svc.redactor.text(f"{call.where}: {call.tool} raised {exc!r}")
    else:
        if svc.hooks.wants(HookPoint.PostToolUse, call.tool):
            # a transformed result is what the step's row keeps: replayed, not re-asked
            after = await svc.hooks.fire(
                HookPoint.PostToolUse,
                {
                    "task_id": task.task_id,
                    "tool": call.tool,
                    "input": call.args,
                    "result": svc.redactor.value(result),
                    "started_at": started,
                },
            )
            result = after.changes.get("result", result)
        at = now_rfc3339()
        done = _record(
            task,
            call,
            semantics,
            idem,
            StepStatus.completed,
            svc.redactor.value(result),
            tool.result_label,
            started_at=started,
            completed_at=at,
        )
        return await _finish(task, call, svc, done, at=at)
    failed = _record(
        task,
        call,
        semantics,
        idem,
        StepStatus.failed,
        None,
        "Extracted",
        started_at=started,
        completed_at=now_rfc3339(),
        error=error,
    )
    return ToolErrored(failed, error)


async def _finish(
    task: TaskRecord, call: StepCall, svc: Services, rec: StepRecord, *, at: str | None = None
) -> Done:
    """Journal a step's outcome (completed, replayed, or skipped by the owner) with the
    task's progress; return the task as that commit left it. `at`: `rec` was made now,
    started and completed (a run's record); any other is stamped completed now."""
    if at is None:
        at = now_rfc3339()
        rec = replace(rec, started_at=rec.started_at or at, completed_at=at)
    # Synthesizing after the last step; Paused instead when the owner asked for a pause
    state = await svc.journal.tasks.step_finished(rec, next_step=call.next_step, last=call.last)
    return Done(_committed(task, call, state, at))


def _record(
    task: TaskRecord,
    call: StepCall,
    semantics: Semantics,
    idem: Idempotency,
    status: StepStatus,
    result: Any,
    label: str,
    *,
    started_at: str = "",
    completed_at: str | None = None,
    error: str | None = None,
) -> StepRecord:
    return StepRecord(
        task.task_id,
        call.step,
        call.tool,
        semantics,
        idem,
        status,
        call.args,
        result,
        label,
        started_at,
        completed_at,
        error,
    )


def _committed(task: TaskRecord, call: StepCall, state: TaskState, at: str) -> TaskRecord:
    """The task as the step's commit left it, without reading it back."""
    going_on: Executing | Synthesizing = (
        Synthesizing() if call.last else Executing(current_step=call.next_step)
    )
    payload: Payload = Paused(then=going_on) if state is TaskState.Paused else going_on
    progress = {"current_step": call.next_step, "last_completed": call.step, "last_step_at": at}
    return replace(
        task,
        state=state,
        phase=TaskState.Synthesizing.phase if call.last else task.phase,
        payload=payload,
        execute_progress=progress,
        recovery_attempts=0,
    )


@dataclass(frozen=True, slots=True)
class _Question:
    """What the owner is asked before a call runs, what the permission hooks are told
    (`reason`), and the taint the question carries."""

    ask: Ask
    reason: str
    taint: str | None = None


async def _question(
    task: TaskRecord,
    call: StepCall,
    semantics: Semantics,
    rules: StepRules,
    answered: Executing,
    svc: Services,
) -> _Question | None:
    """The runner's own question when it has one (the loop's permission prompt), else the
    template's approval of a write; none once the owner approved this run of the step."""
    if _approved(answered, call.step, call.args):
        return None
    if rules.ask is not None:
        ask = rules.ask(call.tool, call.args, semantics)
        return None if ask is None else _Question(ask, ask.description)
    if semantics is not Semantics.Write:
        return None
    labels = (
        [s.label for s in await svc.journal.tasks.steps(task.task_id) if s.step < call.step]
        if rules.approval.tainted_writes
        else []
    )
    need = approval_needed(rules.approval, call.tool, semantics, labels)
    if need is None:
        return None
    description = (
        f"Task {call.title} wants to run {call.tool} ({call.where}): "
        f"{need.reason}." + _carried(rules, call.tool)
    )
    ask = Ask(
        need.action_type,
        description,
        ("approve", "deny"),
        on_deny=rules.approval.on_deny,
        timeout=rules.approval_timeout,
    )
    return _Question(ask, need.reason, need.taint_level)


async def _permission(task: TaskRecord, call: StepCall, why: str, svc: Services) -> Verdict:
    """PermissionRequest (seed 001, 4.2): a handler may grant the call (no question), or
    deny it; a failed handler denies it (a security point fails closed)."""
    verdict = await hooking.decide(
        svc,
        task.task_id,
        call.title,
        HookPoint.PermissionRequest,
        f"step:{call.step}",
        {"tool": call.tool, "input": call.args, "where": call.where, "question": why},
    )
    about = {"task_id": task.task_id, "tool": call.tool, "input": call.args, "by": "hook"}
    if verdict.blocked:
        await hooking.observe(svc, HookPoint.PermissionDenied, {**about, "reason": verdict.blocked})
    elif verdict.allowed:
        await hooking.observe(svc, HookPoint.PermissionGranted, about)
    return verdict


def _blocked(task: TaskRecord, call: StepCall, semantics: Semantics, why: str) -> ToolErrored:
    """A call a hook stopped: it did not run, and its result says why."""
    at = now_rfc3339()
    error = f"{call.where}: did not run: {why}"
    failed = _record(
        task,
        call,
        semantics,
        Idempotency.none,
        StepStatus.failed,
        None,
        "Extracted",
        started_at="",  # it never started
        completed_at=at,
        error=error,
    )
    return ToolErrored(failed, error)


def _sandbox(svc: Services, task_id: str, workdir: Path) -> Sandbox | None:
    return None if svc.sandbox is None else svc.sandbox(task_id, workdir)


def _approved(payload: Executing, i: int, args: dict[str, Any]) -> bool:
    """The owner's grant covers step `i` with exactly the arguments it was shown."""
    grant = payload.approved
    return grant is not None and grant.step == i and grant.args_sha256 == args_digest(args)


def _carried(rules: StepRules, tool: str) -> str:
    """What the runner adds to the call, so the owner approves all of it."""
    names = sorted({n for c in rules.credentials(tool) for n in c.secret_names()})
    return f" It carries the template's credentials: {', '.join(names)}." if names else ""


def _process_recorder(svc: Services, task_id: str, step: int) -> Callable[[int], Awaitable[None]]:
    async def record(pid: int) -> None:
        process = identity(pid)
        if process is not None:
            await svc.journal.tasks.step_process(task_id, step, process)

    return record


def _idempotency(tool: Tool, args: dict[str, Any], rules: StepRules) -> Idempotency:
    idem = tool.idempotency(args)
    if idem is Idempotency.none and getattr(tool, "sends_idempotency_key", False):
        host = urlsplit(str(args.get("url", ""))).netloc.lower()
        if host and host in {h.lower() for h in rules.trusted_key_hosts}:
            return Idempotency.key
    return idem


def missing_secret(ctx: ToolContext, tool: str, args: dict[str, Any]) -> str | None:
    """The first secret a template's `[[credentials]]` would put into this call that the
    vault does not hold (an http.request binding counts for its own host only)."""
    url = str(args.get("url", ""))
    for cred in ctx.credentials:
        if cred.tool != tool or (cred.host is not None and not cred.fits_url(url)):
            continue
        for name in cred.secret_names():
            if ctx.secret(name) is None:
                return name
    return None


def secret_prompt(name: str, call: StepCall) -> dict[str, Any]:
    """A credential prompt's arguments for a secret `[[credentials]]` names (its name,
    never a value)."""
    return {
        "service": name,
        "credential_type": "api_key",
        "instructions": (
            f"{call.where} ({call.tool}) needs the secret {name!r}, which is not in the "
            f"vault; the template's [[credentials]] sends it. Give it, and the step runs."
        ),
        "vault_ref": f"vault:{name}",
    }
