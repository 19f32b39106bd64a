"""The vault: its files, its key, its backups, and what it keeps (secrets, learnings)."""

from __future__ import annotations

from .base import PfarError


class VaultError(PfarError):
    pass


class VaultMissing(VaultError):
    pass


class VaultLocked(VaultError):
    pass


class VaultCorrupt(VaultError):
    pass


class VaultWentBack(VaultError):
    """The journal is behind `vault/acknowledged`, the record of what the kernel
    acknowledged (its write-ahead log was lost, or an older copy was put in place).
    Nothing was written: the message names what is missing, and how to restore it or
    accept the loss (`pfar vault accept-loss`)."""


class VaultKeyMissing(VaultError):
    """The vault is encrypted and its key could not be had (not in the keychain, no key
    file, no passphrase). Nothing was opened; the message says where pfar looked."""


class VaultKeyWrong(VaultError):
    """A key was found but it is not this vault's (its check value differs): the files
    were not touched, and are not damaged for it."""


class VaultIOError(VaultError):
    pass


class VaultUnwritable(VaultIOError):
    """pfar cannot write a vault file (read-only, disk full, permission denied). The data
    is intact: the message says what to fix, never to move or recreate the file."""


class MigrationFailed(VaultError):
    pass


class BackupDamaged(VaultCorrupt):
    """A backup whose files differ from its manifest, or that cannot be opened and
    checked: refused before the home is touched."""


class RestoreRefused(VaultError):
    """A restore that would replace a vault further along than the backup (or one pfar
    cannot read to tell): the message says what would be lost; `--force` goes on."""


class UnknownSecret(PfarError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no secret named {name!r} in the vault; `pfar secret list` lists them")
        self.name = name


class UnknownLearning(PfarError):
    def __init__(self, learning_id: str) -> None:
        super().__init__(
            f"no learning with id {learning_id!r} (or more than one starts so); "
            "`pfar learnings` lists them"
        )
        self.learning_id = learning_id


class KnowledgeUnavailable(PfarError):
    def __init__(self) -> None:
        super().__init__(
            "the knowledge store (vault/memory.db) could not be opened at start; the kernel's "
            "log says why"
        )
