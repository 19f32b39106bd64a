"""`pfar reload` (and SIGHUP): what a running kernel takes from its home again.

Templates are read again from `templates/` (a new cron template's schedule starts;
one whose file broke is named and dropped, as at a start); hooks are loaded again
from `config.toml` and `hooks/`; and the settings that can change live are applied:
`[hooks]`, `[sessions]` (the next agent started uses them) and `[approvals]` (the next
question asked). Any other section that changed is named as needing a restart, and
is left as the kernel started with it. Nothing changes when `config.toml` does not
load, or when a hook does not: the answer names the problem, and what ran goes on.
Scripted models' scripts need nothing: they are re-read when they change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..config import Config
from ..errors import ConfigError, PfarError
from ..hooks import HookPoint, Hooks
from ..hooks.loading import load_handlers
from ..runners import Services, TemplateRegistry
from ..vault.home import Home
from .locks import LockManager
from .scheduler import Scheduler
from .sessions import SessionSupervisor

# the [sections] a running kernel applies; every other one is read at its start
LIVE = ("hooks", "sessions", "approvals", "budget")


@dataclass(frozen=True, slots=True)
class Reloaded:
    """What a reload did, and what it could not."""

    templates: tuple[str, ...]  # the template ids loaded now
    added: tuple[str, ...]
    removed: tuple[str, ...]
    hooks: int  # handlers listening now
    applied: tuple[str, ...]  # live sections that changed and were applied
    restart_needed: tuple[str, ...]  # sections that changed and apply at the next start
    problems: tuple[str, ...]  # a template, config.toml or a hook that did not load

    def to_json(self) -> dict[str, Any]:
        return {
            "templates": list(self.templates),
            "added": list(self.added),
            "removed": list(self.removed),
            "hooks": self.hooks,
            "applied": list(self.applied),
            "restart_needed": list(self.restart_needed),
            "problems": list(self.problems),
        }

    def lines(self) -> list[str]:
        """The answer for people, one fact a line."""
        out = [f"templates: {len(self.templates)} loaded ({', '.join(self.templates) or 'none'})"]
        if self.added:
            out.append(f"  new: {', '.join(self.added)}")
        if self.removed:
            out.append(f"  gone: {', '.join(self.removed)}")
        out.append(f"hooks: {self.hooks} handler(s)")
        if self.applied:
            out.append(f"settings applied: [{'], ['.join(self.applied)}]")
        if self.restart_needed:
            out.append(
                f"changed, but a restart is needed for them to apply: "
                f"[{'], ['.join(self.restart_needed)}]"
            )
        out += [f"not loaded: {p}" for p in self.problems]
        return out


class ReloadHost(Protocol):
    """What a reload reads of the kernel, and what it replaces (its settings and the
    templates' errors)."""

    home: Home
    config: Config
    templates: TemplateRegistry
    template_errors: list[ConfigError]
    hooks: Hooks
    locks: LockManager
    sessions: SessionSupervisor
    services: Services
    scheduler: Scheduler


async def reload_kernel(kernel: ReloadHost) -> Reloaded:
    before = set(kernel.templates.ids())
    errors = kernel.templates.load()
    kernel.template_errors = errors
    problems = [str(e) for e in errors]
    now = kernel.templates.ids()
    kernel.scheduler.nudge()
    applied: list[str] = []
    restart: list[str] = []
    try:
        config = Config.load(kernel.home.config)
    except PfarError as exc:
        problems.append(f"{exc} (no setting was changed)")
        config = None
    if config is not None:
        old = kernel.config
        fields = type(config).model_fields
        changed = [name for name in fields if getattr(config, name) != getattr(old, name)]
        restart = [name for name in changed if name not in LIVE]
        try:
            handlers = load_handlers(
                config.hooks, kernel.home.config, kernel.home.hooks_dir, kernel.home.root
            )
        except PfarError as exc:
            problems.append(f"{exc} (the hooks are as they were)")
        else:
            kernel.hooks.replace(handlers)
            # the lock manager calls its observer only when a lock point is listened at
            locking = (
                HookPoint.ResourceLockWait,
                HookPoint.ResourceLockAcquired,
                HookPoint.ResourceLockReleased,
            )
            wanted = any(kernel.hooks.wants(p) for p in locking)
            kernel.locks.observe = kernel.hooks.observe if wanted else None
            update: dict[str, Any] = {"hooks": config.hooks}
            if "sessions" in changed and kernel.sessions is not None:
                kernel.sessions.configure(config.sessions)
                update["sessions"] = config.sessions
            if "approvals" in changed:
                kernel.services.approval_timeout_seconds = config.approvals.approval_timeout_seconds
                kernel.services.credential_timeout_seconds = (
                    config.approvals.credential_prompt_timeout_seconds
                )
                update["approvals"] = config.approvals
            if "budget" in changed:  # the spend gate reads it at each model call
                update["budget"] = config.budget
            applied = [name for name in changed if name in update]
            kernel.config = old.model_copy(update=update)
    return Reloaded(
        tuple(now),
        tuple(sorted(set(now) - before)),
        tuple(sorted(before - set(now))),
        len(kernel.hooks.handlers),
        tuple(applied),
        tuple(restart),
        tuple(problems),
    )
