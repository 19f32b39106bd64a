"""Stage 3 of the start: the services tasks run with. Templates, tools, the model,
hooks, locks and learnings, loaded and validated before the journal is written to,
so a bad script or config stops the start without touching any task.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..config import Config
from ..errors import ConfigError, PfarError
from ..hooks import HookPoint, Hooks
from ..hooks.loading import load_handlers
from ..journal import TaskRecord
from ..journal.locks_sql import LockOwner
from ..journal.rows import LlmCall
from ..journal.store import Store
from ..llm.proxy import CallRecord, ChatModel, InferenceProxy
from ..policy.redact import Redactor
from ..runners import Services, TemplateRegistry
from ..runners.loop.permissions import Policy
from ..runners.spend_gate import SpendGate
from ..tools import sandbox, sandbox_mounts
from ..tools.processes import start_time
from ..tools.registry import ToolRegistry
from ..vault import keys, knowledge
from ..vault.driver import sqlite
from ..vault.home import Home
from ..vault.secrets import SecretStore
from .admission import Admission
from .api.attach import Viewers
from .learning import Learner
from .locks import LockManager, LockTable
from .mcp_servers import build as build_mcp
from .models import build_model, scripted_proxy
from .owner import OwnerChannel
from .provider_notices import ProviderNotices

if TYPE_CHECKING:
    from ..tools.mcp.servers import McpServers

log = logging.getLogger("pfar.kernel")

Sandboxer = Callable[[str, Path], sandbox.Sandbox]


class ServicesHost(Protocol):
    """What loading the services reads of the kernel (the owner's channel and the
    admission late: they are made after the services), and what it sets."""

    boot_id: str
    home: Home
    journal: Store
    secrets: SecretStore
    redactor: Redactor
    viewers: Viewers
    knowledge: knowledge.KnowledgeStore | None
    owner: OwnerChannel
    admission: Admission
    config: Config  # as loaded, and as `pfar reload` leaves it
    # set here
    tools: ToolRegistry
    templates: TemplateRegistry
    template_errors: list[ConfigError]
    model: InferenceProxy
    hooks: Hooks
    locks: LockManager
    learner: Learner
    services: Services
    mcp: McpServers | None

    @property
    def lock_owner(self) -> LockOwner: ...

    def advance(self, task_id: str, *, created: TaskRecord | None = None) -> None: ...


def load_services(
    k: ServicesHost,
    config: Config,
    *,
    tools: ToolRegistry | None,
    model: ChatModel | None,
    sandboxer: Sandboxer | None,
    sandbox_home: str,
) -> None:
    """Load the kernel's task services onto `k`. `tools` and `model` stand in for the
    built-in tools and [llm]'s model when given (tests, benchmarks); `sandbox_home`
    labels the home's MCP servers, as its sandboxes (kernel/mcp_servers.py)."""
    k.tools = tools or ToolRegistry.builtin()
    k.templates = TemplateRegistry(k.home.templates_dir, [tool.name for tool in k.tools])
    k.template_errors = k.templates.load()
    k.model = _load_model(k, config, model)
    # the caps of [budget] as they are at each call (a reload changes them)
    k.model.gate = SpendGate(k.journal, lambda: k.config.budget)
    k.hooks = Hooks(load_handlers(config.hooks, k.home.config, k.home.hooks_dir, k.home.root))
    locking = (
        HookPoint.ResourceLockWait,
        HookPoint.ResourceLockAcquired,
        HookPoint.ResourceLockReleased,
    )
    k.locks = LockManager(
        config.scheduler.lock_timeout_seconds,
        k.hooks.observe if any(k.hooks.wants(p) for p in locking) else None,
        LockTable(k.journal.locks, k.lock_owner, config.scheduler.lock_lease_seconds, alive),
    )
    k.learner = Learner(
        lambda: k.knowledge,
        k.hooks,
        k.journal,
        k.model,
        config.loop.learnings,
        config.loop.tool_seconds,
    )
    k.mcp = build_mcp(
        config,
        k.tools,
        root=k.home.root,
        home_tag=sandbox_home,
        boot_id=k.boot_id,
        journal=k.journal,
        notify=lambda: k.owner.notify(),  # noqa: PLW0108  (late-bound, as below)
        secret=k.secrets.get,
        redact=k.redactor.text,
        sandboxer=sandboxer,
    )
    k.services = Services(
        journal=k.journal,
        tools=k.tools,
        model=k.model,
        templates=k.templates,
        secret=k.secrets.get,
        redactor=k.redactor,
        # a task's directory is asked for at each of its steps: the path is made once
        workspace=functools.lru_cache(maxsize=4096)(k.home.workspace),
        approval_timeout_seconds=config.approvals.approval_timeout_seconds,
        credential_timeout_seconds=config.approvals.credential_prompt_timeout_seconds,
        # late-bound: the owner's channel is made after the services
        notify_owner=lambda: k.owner.notify(),  # noqa: PLW0108
        loop=config.loop,
        loop_policy=Policy.of(config.loop, home=k.home.root),
        advance=k.advance,
        # late-bound: the admission is made at start, after the services
        enter=lambda task_id, priority: k.admission.enter(task_id, priority),  # noqa: PLW0108
        forget=lambda task_id: k.admission.forget(task_id),  # noqa: PLW0108
        loop_events=k.viewers.publish,
        sandbox=sandboxer,
        hold=k.locks.hold,
        hooks=k.hooks,
        mcp=k.mcp,
    )


def _load_model(k: ServicesHost, config: Config, model: ChatModel | None) -> InferenceProxy:
    def on_call(call: CallRecord) -> None:
        # field by field: asdict's deep copy costs more than the row's insert
        k.journal.tasks.record_llm_call(
            LlmCall(
                task_id=call.task_id,
                provider=call.provider,
                model=call.model,
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
                time_to_first_token=call.time_to_first_token,
                total_time=call.total_time,
                cost_usd=call.cost_usd,
                queued_seconds=call.queued_seconds,
                granted_at=call.granted_at,
                priced=call.priced,
            )
        )

    if model is not None:  # it answers in-process
        return scripted_proxy(model, config, on_call=on_call)
    # late-bound: the owner's channel is made after the services
    notices = ProviderNotices(
        k.boot_id,
        k.journal,
        lambda: k.owner.notify(),  # noqa: PLW0108
        k.redactor.text,
    )
    return build_model(
        config, home=k.home, secret=k.secrets.get, on_call=on_call, on_health=notices
    )


def sandboxer(home: Home, sandbox_home: str, config: Config) -> Sandboxer | None:
    """What makes a task's (or an agent session's) sandbox; None with sandboxes off."""
    if not config.sandbox.enabled:
        return None
    if not sandbox.available():
        raise ConfigError(
            str(home.config),
            "sandbox.enabled",
            "bubblewrap (bwrap) is not installed: install the Debian package "
            "`bubblewrap`, or set it to false",
        )
    network, root = config.sandbox.network, home.root
    passed = frozenset(config.sandbox.pass_env)

    def make(task_id: str, workdir: Path) -> sandbox.Sandbox:
        # what is hidden is looked up each time: a credential folder made later counts
        hidden = sandbox_mounts.hidden_paths(root)
        return sandbox.Sandbox(sandbox_home, task_id, workdir, network, hidden, passed)

    return make


def open_knowledge(path: Path, key: keys.VaultKey | None) -> knowledge.KnowledgeStore | None:
    """memory.db's learnings; None (logged) when it cannot be opened: tasks run on
    without learnings, since the store is a help, never a dependency."""
    try:
        return knowledge.KnowledgeStore.open(path, key=key)
    except (PfarError, sqlite.Error, OSError) as exc:
        log.warning("knowledge store unavailable (%s): tasks get no learnings", exc)
        return None


def alive(pid: int, started: int) -> bool:
    """Whether the process `pid` that started at `started` still runs (here)."""
    return started != 0 and start_time(pid) == started
