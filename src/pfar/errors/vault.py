"""The vault: its files, its key, its backups, and what it keeps (secrets, learnings)."""

from __future__ import annotations

from .base import PfarError


class VaultError(PfarError):
    code = "vault"


class VaultMissing(VaultError):
    code = "vault_missing"


class VaultLocked(VaultError):
    code = "vault_locked"


class VaultCorrupt(VaultError):
    code = "vault_corrupt"


class VaultWentBack(VaultError):
    """The journal is behind `vault/acknowledged`, the record of what the kernel
    acknowledged (its write-ahead log was lost, or an older copy was put in place).
    Nothing was written: the message names what is missing, and how to restore it or
    accept the loss (`pfar vault accept-loss`)."""

    code = "vault_went_back"


class VaultKeyMissing(VaultError):
    """The vault is encrypted and its key could not be had (not in the keychain, no key
    file, no passphrase). Nothing was opened; the message says where pfar looked."""

    code = "vault_key_missing"


class VaultKeyWrong(VaultError):
    """A key was found but it is not this vault's (its check value differs): the files
    were not touched, and are not damaged for it."""

    code = "vault_key_wrong"


class VaultIOError(VaultError):
    code = "vault_io"


class VaultUnwritable(VaultIOError):
    """pfar cannot write a vault file (read-only, disk full, permission denied). The data
    is intact: the message says what to fix, never to move or recreate the file."""

    code = "vault_unwritable"


class MigrationFailed(VaultError):
    code = "migration_failed"


class BackupDamaged(VaultCorrupt):
    """A backup whose files differ from its manifest, or that cannot be opened and
    checked: refused before the home is touched."""

    code = "backup_damaged"


class RestoreRefused(VaultError):
    """A restore that would replace a vault further along than the backup (or one pfar
    cannot read to tell): the message says what would be lost; `--force` goes on."""

    code = "restore_refused"


class UnknownSecret(PfarError):
    code = "unknown_secret"

    def __init__(self, name: str) -> None:
        super().__init__(f"no secret named {name!r} in the vault; `pfar secret list` lists them")
        self.name = name


class UnknownLearning(PfarError):
    code = "unknown_learning"

    def __init__(self, learning_id: str) -> None:
        super().__init__(
            f"no learning with id {learning_id!r} (or more than one starts so); "
            "`pfar learnings` lists them"
        )
        self.learning_id = learning_id


class KnowledgeUnavailable(PfarError):
    code = "knowledge_unavailable"

    def __init__(self) -> None:
        super().__init__(
            "the knowledge store (vault/memory.db) could not be opened at start; the kernel's "
            "log says why"
        )
