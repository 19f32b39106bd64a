"""What a step's tool runs with: its context (workspace, secrets, credentials, sandbox,
the record of the processes it starts), its idempotency, and the secret a template's
`[[credentials]]` would send that the vault lacks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..journal import TaskRecord
from ..journal.records import Idempotency
from ..tools.base import Tool, ToolContext
from ..tools.processes import identity
from ..tools.sandbox import Sandbox
from .services import Services
from .step_call import StepCall, StepRules
from .summaries import summarizer


def tool_context(
    task: TaskRecord, call: StepCall, rules: StepRules, svc: Services, workdir: Path
) -> ToolContext:
    """The context the step's tool runs in (`workdir`: the runner's, or the task's
    workspace in the home)."""
    i = call.step
    return ToolContext(
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
        skills=rules.skills,
    )


def _sandbox(svc: Services, task_id: str, workdir: Path) -> Sandbox | None:
    return None if svc.sandbox is None else svc.sandbox(task_id, workdir)


def _process_recorder(svc: Services, task_id: str, step: int) -> Callable[[int], Awaitable[None]]:
    async def record(pid: int) -> None:
        process = identity(pid)
        if process is not None:
            await svc.journal.tasks.step_process(task_id, step, process)

    return record


def idempotency(tool: Tool, args: dict[str, Any], rules: StepRules) -> Idempotency:
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
