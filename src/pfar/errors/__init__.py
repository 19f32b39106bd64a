"""Errors raised by pfar.

Every message names the file, field, id or key involved and, where there is
one, what to do about it. Every class has a stable `code` beside it (`unknown_task`):
what a client branches on, never the class's name (docs/operator-api.md lists them).

* PfarError
  + ConfigError              a config or template file is malformed (file and key named)
    - ConfigErrors           several problems in one file, each with its key
    - UnsafePermissions      a file pfar would load can be changed by another user
  + VaultError
    - VaultMissing           the vault does not exist where it should
    - VaultLocked            another kernel owns this home
    - VaultKeyMissing        the vault is encrypted and its key could not be had
    - VaultKeyWrong          a key was found but it is not this vault's (files untouched)
    - VaultCorrupt           a database file is not readable; never repaired by overwriting
      . BackupDamaged        a backup's files differ from its manifest or cannot be read
    - VaultWentBack          the journal holds less than the kernel acknowledged
    - VaultIOError           a write or fsync failed: the kernel stops (fail-stop)
      . VaultUnwritable      read-only, disk full, permission denied: not damage
      . StoreUnavailable     the journal's database cannot be reached (a server down)
    - MigrationFailed
    - RestoreRefused         a restore would replace a newer (or unreadable) vault
    - SessionStoreError      the sessions table could not be read or written (rolled back)
    - SessionRecoveryFailed  session crash recovery stopped at a database error
  + UnknownSecret            no secret of that name in the vault
  + UnknownLearning          no learning with that id (or more than one starts so)
  + KnowledgeUnavailable     the knowledge store could not be opened at start
  + JournalError
    - UnknownTask
    - UnknownApproval
    - UnknownCredentialPrompt
    - IllegalTransition      the state machine refused a transition
    - TaskStateRefused       cancel / pause / resume asked of a task in a state that forbids it
    - AlreadyDecided         an approval or prompt was already answered or expired
    - AmbiguousId            an id prefix matches more than one record
    - IdPrefixTooShort       an id prefix is shorter than the few characters it takes
    - EventIdReused          an event id came back with another template or text
    - MalformedTaskRow       a task row holds what no pfar writes (field named); left as it is
    - MalformedRow           another journal row holds a value no pfar writes; left as it is
    - UnknownMessageKey      text that is no kind of owner-message key pfar writes
    - WriteRefused           the store refused one write (a constraint it broke); the rest stand
    - StaleConversation      a loop task's conversation moved on under a writer that read it
    - UnknownSession
    - IllegalSessionTransition  the session state machine refused a transition
    - SessionStatusMismatch  compare-and-set: the session is not in the expected status
    - SessionThreadBusy      a chat thread already has a live session
    - InvalidSessionContext  a session's context or process is not plain JSON
  + ToolError
    - UnknownTool
    - ToolTimeout
    - ToolFailed
    - ResourceLocked         a call's resource lock was not to be had within the timeout
  + ProviderError            the LLM provider could not answer
  + KernelNotRunning         a command needs a running kernel
    - KernelNotReady         one holds the home but is starting or stopping
  + ShuttingDown             the kernel is shutting down and takes no new work
  + NotTheOwner              a control-socket request that is not the owner's `pfar` command
  + BadRequest               a request's field has the wrong type or shape (field named)
    - AnswerDoesNotFit       an answer the question does not offer (the ones it does named)
    - NotALoopTask           a conversation asked of a task that has none (its kind named)
  + BadReply                 a kernel's answer that does not fit its op's record

The modules, one room each: `base` (PfarError), `config`, `vault` (its files, key and
backups, and the secrets and learnings it keeps), `journal` (the journal and its store),
`sessions`, `tools` (and the model provider) and `operator` (the owner's requests to
the kernel).
"""

from .base import PfarError
from .config import ConfigError, ConfigErrors, UnsafePermissions
from .journal import (
    AlreadyDecided,
    AmbiguousId,
    EventIdReused,
    IdPrefixTooShort,
    IllegalTransition,
    JournalError,
    MalformedRow,
    MalformedTaskRow,
    StaleConversation,
    StoreUnavailable,
    TaskStateRefused,
    UnknownApproval,
    UnknownCredentialPrompt,
    UnknownMessageKey,
    UnknownTask,
    WriteRefused,
)
from .operator import (
    AnswerDoesNotFit,
    BadReply,
    BadRequest,
    KernelNotReady,
    KernelNotRunning,
    NotALoopTask,
    NotTheOwner,
    ShuttingDown,
)
from .sessions import (
    IllegalSessionTransition,
    InvalidSessionContext,
    SessionRecoveryFailed,
    SessionStatusMismatch,
    SessionStoreError,
    SessionThreadBusy,
    UnknownSession,
)
from .tools import ProviderError, ResourceLocked, ToolError, ToolFailed, ToolTimeout, UnknownTool
from .vault import (
    BackupDamaged,
    KnowledgeUnavailable,
    MigrationFailed,
    RestoreRefused,
    UnknownLearning,
    UnknownSecret,
    VaultCorrupt,
    VaultError,
    VaultIOError,
    VaultKeyMissing,
    VaultKeyWrong,
    VaultLocked,
    VaultMissing,
    VaultUnwritable,
    VaultWentBack,
)

__all__ = [
    "AlreadyDecided",
    "AmbiguousId",
    "AnswerDoesNotFit",
    "BackupDamaged",
    "BadReply",
    "BadRequest",
    "ConfigError",
    "ConfigErrors",
    "EventIdReused",
    "IdPrefixTooShort",
    "IllegalSessionTransition",
    "IllegalTransition",
    "InvalidSessionContext",
    "JournalError",
    "KernelNotReady",
    "KernelNotRunning",
    "KnowledgeUnavailable",
    "MalformedRow",
    "MalformedTaskRow",
    "MigrationFailed",
    "NotALoopTask",
    "NotTheOwner",
    "PfarError",
    "ProviderError",
    "ResourceLocked",
    "RestoreRefused",
    "SessionRecoveryFailed",
    "SessionStatusMismatch",
    "SessionStoreError",
    "SessionThreadBusy",
    "ShuttingDown",
    "StaleConversation",
    "StoreUnavailable",
    "TaskStateRefused",
    "ToolError",
    "ToolFailed",
    "ToolTimeout",
    "UnknownApproval",
    "UnknownCredentialPrompt",
    "UnknownLearning",
    "UnknownMessageKey",
    "UnknownSecret",
    "UnknownSession",
    "UnknownTask",
    "UnknownTool",
    "UnsafePermissions",
    "VaultCorrupt",
    "VaultError",
    "VaultIOError",
    "VaultKeyMissing",
    "VaultKeyWrong",
    "VaultLocked",
    "VaultMissing",
    "VaultUnwritable",
    "VaultWentBack",
    "WriteRefused",
]
