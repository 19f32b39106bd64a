"""Every error pfar raises on purpose carries a stable code beside its message: what a
client (the `pfar` command, the console, a script) branches on. A code is part of the
operator API: renaming a class never changes it, and a change here is a change to the
API that its users must be told of."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pfar
from pfar.errors import PfarError

# every error class of the package (module.qualname) and its code
PINNED = {
    "pfar.adapters.channel.AuthFailed": "channel_auth_failed",
    "pfar.adapters.channel.ChannelDown": "channel_down",
    "pfar.adapters.channel.ChannelError": "channel",
    "pfar.adapters.channel.InDoubt": "delivery_in_doubt",
    "pfar.adapters.channel.RateLimited": "rate_limited",
    "pfar.adapters.channel.Undeliverable": "undeliverable",
    "pfar.cli.client.RemoteBadRequest": "bad_request",
    "pfar.cli.client.RemoteError": "remote",
    "pfar.errors.base.PfarError": "error",
    "pfar.runners.spend_caps.SpendCapReached": "spend_cap_reached",
    "pfar.errors.config.ConfigError": "config",
    "pfar.errors.config.ConfigErrors": "config_errors",
    "pfar.errors.config.UnsafePermissions": "unsafe_permissions",
    "pfar.errors.journal.AlreadyDecided": "already_decided",
    "pfar.errors.journal.AmbiguousId": "ambiguous_id",
    "pfar.errors.journal.EventIdReused": "event_id_reused",
    "pfar.errors.journal.IdPrefixTooShort": "id_prefix_too_short",
    "pfar.errors.journal.IllegalTransition": "illegal_transition",
    "pfar.errors.journal.JournalError": "journal",
    "pfar.errors.journal.MalformedRow": "malformed_row",
    "pfar.errors.journal.MalformedTaskRow": "malformed_task_row",
    "pfar.errors.journal.StaleConversation": "stale_conversation",
    "pfar.errors.journal.StoreUnavailable": "store_unavailable",
    "pfar.errors.journal.TaskStateRefused": "task_state_refused",
    "pfar.errors.journal.UnknownApproval": "unknown_approval",
    "pfar.errors.journal.UnknownCredentialPrompt": "unknown_credential_prompt",
    "pfar.errors.journal.UnknownMessageKey": "unknown_message_key",
    "pfar.errors.journal.UnknownTask": "unknown_task",
    "pfar.errors.journal.WriteRefused": "write_refused",
    "pfar.errors.operator.AnswerDoesNotFit": "answer_does_not_fit",
    "pfar.console.bodies.TooLarge": "too_large",
    "pfar.errors.operator.BadReply": "bad_reply",
    "pfar.errors.operator.BadRequest": "bad_request",
    "pfar.errors.operator.NotALoopTask": "not_a_loop_task",
    "pfar.errors.operator.KernelNotReady": "kernel_not_ready",
    "pfar.errors.operator.KernelNotRunning": "kernel_not_running",
    "pfar.errors.operator.NotTheOwner": "not_the_owner",
    "pfar.errors.operator.ShuttingDown": "shutting_down",
    "pfar.errors.sessions.IllegalSessionTransition": "illegal_session_transition",
    "pfar.errors.sessions.InvalidSessionContext": "invalid_session_context",
    "pfar.errors.sessions.SessionRecoveryFailed": "session_recovery_failed",
    "pfar.errors.sessions.SessionStatusMismatch": "session_status_mismatch",
    "pfar.errors.sessions.SessionStoreError": "session_store",
    "pfar.errors.sessions.SessionThreadBusy": "session_thread_busy",
    "pfar.errors.sessions.UnknownSession": "unknown_session",
    "pfar.errors.tools.ProviderError": "provider",
    "pfar.errors.tools.ResourceLocked": "resource_locked",
    "pfar.errors.tools.ToolError": "tool",
    "pfar.errors.tools.ToolFailed": "tool_failed",
    "pfar.errors.tools.ToolTimeout": "tool_timeout",
    "pfar.errors.tools.UnknownTool": "unknown_tool",
    "pfar.errors.vault.BackupDamaged": "backup_damaged",
    "pfar.errors.vault.KnowledgeUnavailable": "knowledge_unavailable",
    "pfar.errors.vault.MigrationFailed": "migration_failed",
    "pfar.errors.vault.RestoreRefused": "restore_refused",
    "pfar.errors.vault.UnknownLearning": "unknown_learning",
    "pfar.errors.vault.UnknownSecret": "unknown_secret",
    "pfar.errors.vault.VaultCorrupt": "vault_corrupt",
    "pfar.errors.vault.VaultError": "vault",
    "pfar.errors.vault.VaultIOError": "vault_io",
    "pfar.errors.vault.VaultKeyMissing": "vault_key_missing",
    "pfar.errors.vault.VaultKeyWrong": "vault_key_wrong",
    "pfar.errors.vault.VaultLocked": "vault_locked",
    "pfar.errors.vault.VaultMissing": "vault_missing",
    "pfar.errors.vault.VaultUnwritable": "vault_unwritable",
    "pfar.errors.vault.VaultWentBack": "vault_went_back",
    "pfar.llm.failover.ProvidersDown": "providers_down",
    "pfar.llm.proxy.NeedsCloudRouting": "needs_cloud_routing",
    "pfar.llm.retry.ProviderCallFailed": "provider_call_failed",
    "pfar.runners.workflow.trace.StepMismatch": "step_mismatch",
    "pfar.runners.workflow.trace.TraceFormatError": "trace_format",
    "pfar.tools.hosts.HostRefused": "host_refused",
    "pfar.vault.sqlite.DamagedDatabase": "vault_corrupt",
    "pfar.vault.sqlite.UnwritableDatabase": "vault_unwritable",
}


def _all_errors() -> list[type[PfarError]]:
    for module in pkgutil.walk_packages(pfar.__path__, "pfar."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    def below(cls: type[PfarError]) -> Iterator[type[PfarError]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    return [PfarError, *below(PfarError)]


def test_each_error_class_names_its_own_code() -> None:
    inherited = [f"{c.__module__}.{c.__qualname__}" for c in _all_errors() if "code" not in vars(c)]
    assert inherited == [], "give each of these a `code` of its own (and pin it here)"


def test_the_codes_are_the_pinned_ones() -> None:
    found = {f"{c.__module__}.{c.__qualname__}": c.code for c in _all_errors()}
    assert found == PINNED


def test_a_code_names_one_kind_of_error() -> None:
    """Two classes share a code only where one is the other's driver-specific form (a
    damaged SQLite file is the vault's damage to a client)."""
    by_code: dict[str, type[PfarError]] = {}
    for cls in _all_errors():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", cls.code), cls
        first = by_code.setdefault(cls.code, cls)
        assert first is cls or issubclass(cls, first) or issubclass(first, cls), (first, cls)


def test_the_operator_api_docs_name_every_code() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operator-api.md").read_text()
    told = set(re.findall(r"^\| `([a-z_]+)` \|", docs, re.MULTILINE))
    codes = {c.code for c in _all_errors()} - {"remote"}  # the client's own, never sent
    assert codes <= told, sorted(codes - told)
    assert {"busy", "internal"} <= told  # the socket's own, outside the error tree
