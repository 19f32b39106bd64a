"""Stage 1 of the start: the home's stores opened. The journal, secrets.db, memory.db
and the agent sessions; the redactor made from the secrets; then stage 3's services
(kernel/task_services.py) and the audit log, whose first records say what started.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Protocol

from ..config import Config
from ..journal.faults import FaultHook
from ..journal.open_store import open_store
from ..journal.store import Store
from ..llm.proxy import ChatModel
from ..policy.redact import RedactingFilter, Redactor
from ..tools.registry import ToolRegistry
from ..vault import keys
from ..vault.backup import pfar_version
from ..vault.home import Home
from ..vault.secrets import SecretStore
from . import task_services, vault_start
from .audit import AuditLog
from .bus_bell import BusBell
from .guards import guards_off
from .sessions import SessionSupervisor
from .task_services import ServicesHost

log = logging.getLogger("pfar.kernel")


class Counted(Protocol):
    def count(self) -> int: ...


class OpeningHost(ServicesHost, Protocol):
    """What opening sets on the kernel, beside the services."""

    boot_id: str
    sessions: SessionSupervisor
    audit: AuditLog
    log_filter: RedactingFilter
    bus_bell: BusBell

    @property
    def driver(self) -> Counted: ...


async def open_stores(
    k: OpeningHost,
    config: Config,
    key: keys.VaultKey | None,
    opened: list[SecretStore | Store],
    *,
    fault_hook: FaultHook,
    write_failed: Callable[[BaseException], None],
    sandbox_home: str,
    tools: ToolRegistry | None,
    model: ChatModel | None,
) -> None:
    """Open the stores onto `k`, each into `opened` as it is (the caller closes them if
    the start goes no further)."""
    in_vault = config.vault.backend == "sqlite"
    if in_vault:  # the journal first: a vault that cannot be opened is named by it
        k.journal = await open_store(k.home, config.vault, key=key, fault_hook=fault_hook)
        opened.append(k.journal)
    k.secrets = SecretStore.open(k.home.secrets_db, key=key, synchronous=config.vault.synchronous)
    opened.append(k.secrets)
    if not in_vault:  # after the secrets: the server's password may be one of them
        k.journal = await open_store(
            k.home, config.vault, key=key, secrets=k.secrets, fault_hook=fault_hook
        )
        opened.append(k.journal)
    k.journal.writer.on_failure = write_failed
    # each commit that appends to the event bus wakes its live views
    k.journal.writer.watcher = k.bus_bell
    # with one task running (or none: a submit), no other write would share its
    # commit: it commits at once (GroupCommitWriter.alone)
    k.journal.writer.alone = lambda: k.driver.count() <= 1
    k.knowledge = task_services.open_knowledge(k.home.memory_db, key)
    k.sessions = SessionSupervisor(
        k.journal.sessions,
        k.home.root / "sessions",
        config.sessions,
        task_services.sandboxer(k.home, sandbox_home, config),
    )
    k.redactor = Redactor(k.secrets.values)
    for name in k.redactor.too_short:
        log.warning(
            "secret %r is too short to be redacted; set a longer value with `pfar secret set %s`",
            name,
            name,
        )
    k.log_filter = RedactingFilter(k.redactor)  # for pfar's log handlers
    # Stage 3: services, before any journal write
    task_services.load_services(
        k,
        config,
        tools=tools,
        model=model,
        sandboxer=task_services.sandboxer(k.home, sandbox_home, config),
        sandbox_home=sandbox_home,
    )
    k.audit = AuditLog(k.home.audit_log, k.redactor)


def log_start(k: OpeningHost, config: Config, vault: vault_start.VaultStart) -> None:
    """The audit log's first records of a start: what started, what the vault checks
    found, and every guard that is off (said at every start, so no one runs them
    unaware)."""
    k.audit.log(
        "system_startup",
        version=pfar_version(),
        boot_id=k.boot_id,
        config_hash=_config_hash(k.home),
    )
    for event, fields in vault.audit:
        k.audit.log(event, **fields)
    for off in guards_off(config):
        log.warning("guard off: %s (%s)", off.detail, off.guard)
        k.audit.log("guard_off", guard=off.guard, detail=off.detail)


def _config_hash(home: Home) -> str:
    try:
        return hashlib.sha256(home.config.read_bytes()).hexdigest()[:16]
    except OSError:
        return "defaults"


async def close(resource: SecretStore | Store) -> None:
    """Close what a start opened before it failed (a journal on a server is awaited)."""
    if isinstance(resource, SecretStore):
        resource.close()
    else:
        await resource.aclose(checkpoint=False)
