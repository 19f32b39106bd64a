"""Errors raised by pfar.

Every message names the file, field, id or key involved and, where there is
one, what to do about it.

* PfarError
  + ConfigError              a config or template file is malformed (file and key named)
    - ConfigErrors           several problems in one file, each with its key
    - UnsafePermissions      a file pfar would load can be changed by another user
  + VaultError
    - VaultMissing           the vault does not exist where it should
    - VaultLocked            another kernel owns this home
    - VaultCorrupt           a database file is not readable; never repaired by overwriting
    - VaultWentBack          the journal holds less than the kernel acknowledged
    - VaultIOError           a write or fsync failed: the kernel stops (fail-stop)
      . VaultUnwritable      read-only, disk full, permission denied: not damage
    - MigrationFailed
    - BackupDamaged          a backup's files differ from its manifest or cannot be read
    - RestoreRefused         a restore would replace a newer (or unreadable) vault
    - SessionStoreError      the sessions table could not be read or written (rolled back)
    - SessionRecoveryFailed  session crash recovery stopped at a database error
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
    - UnknownSession
    - IllegalSessionTransition  the session state machine refused a transition
    - SessionStatusMismatch  compare-and-set: the session is not in the expected status
    - SessionThreadBusy      a chat thread already has a live session
    - InvalidSessionContext  a session's context or process is not plain JSON
  + ToolError
    - UnknownTool
    - ToolTimeout
    - ToolFailed
  + ProviderError            the LLM provider could not answer
  + KernelNotRunning         a command needs a running kernel
    - KernelNotReady         one holds the home but is starting or stopping
  + ShuttingDown             the kernel is shutting down and takes no new work
  + BadRequest               a request's field has the wrong type or shape (field named)
    - AnswerDoesNotFit       an answer the question does not offer (the ones it does named)
"""

from __future__ import annotations


class PfarError(Exception):
    """Base of every error pfar raises on purpose."""


class ConfigError(PfarError):
    def __init__(self, path: str, key: str, problem: str) -> None:
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {problem}")
        self.path, self.key, self.problem = path, key, problem

    @property
    def each(self) -> list[ConfigError]:
        """Every problem, one error each (`path: key: problem`)."""
        return [self]


class ConfigErrors(ConfigError):
    """Several problems in one file, reported together: one line each, with its key."""

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.path, first.key, first.problem)
        self.args = ("\n".join(str(e) for e in errors),)
        self.errors = errors

    @property
    def each(self) -> list[ConfigError]:
        return list(self.errors)


class UnsafePermissions(ConfigError):
    """`path` (or `culprit`, a directory above it) can be written by someone else: loading
    it would let another local user choose what pfar runs as its owner."""

    def __init__(self, path: str, culprit: str, problem: str) -> None:
        fix = f"chown $(id -u) {culprit}" if "owned by" in problem else f"chmod go-w {culprit}"
        where = "it" if culprit == path else culprit
        super().__init__(
            path,
            "",
            f"refused: {where} {problem}, so another user could change what pfar runs; "
            f"fix it with `{fix}` and check the contents",
        )
        self.culprit = culprit


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


class JournalError(PfarError):
    pass


class WriteRefused(JournalError):
    """The store refused one write (a constraint the write broke); nothing of it was
    written, and the writes committed beside it stand."""


class StoreUnavailable(VaultIOError):
    """The journal's database cannot be reached (a PostgreSQL server down, a connection
    lost): nothing more is written until the kernel starts again."""


class UnknownTask(JournalError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"no task with id {task_id!r}; `pfar tasks` lists them")
        self.task_id = task_id


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


class UnknownApproval(JournalError):
    def __init__(self, approval_id: str) -> None:
        super().__init__(f"no approval with id {approval_id!r}; `pfar approvals` lists them")
        self.approval_id = approval_id


class UnknownCredentialPrompt(JournalError):
    def __init__(self, prompt_id: str) -> None:
        super().__init__(
            f"no credential prompt with id {prompt_id!r}; `pfar approvals` lists pending prompts"
        )
        self.prompt_id = prompt_id


class IllegalTransition(JournalError):
    def __init__(self, task_id: str, src: str, dst: str) -> None:
        super().__init__(f"task {task_id}: cannot go from {src} to {dst}")
        self.task_id, self.src, self.dst = task_id, src, dst


class TaskStateRefused(JournalError):
    """The owner asked to cancel, pause or resume a task whose state does not allow it."""

    def __init__(self, task_id: str, state: str, action: str, why: str) -> None:
        super().__init__(
            f"task {task_id} is {state}: {why}, so it cannot be {action}; nothing was changed"
        )
        self.task_id, self.state, self.action = task_id, state, action


class AlreadyDecided(JournalError):
    def __init__(self, what: str, item_id: str, status: str) -> None:
        super().__init__(f"{what} {item_id} is already {status}; nothing was changed")
        self.item_id, self.status = item_id, status


class AmbiguousId(JournalError):
    def __init__(self, what: str, prefix: str) -> None:
        super().__init__(f"{prefix!r} matches more than one {what}; give more of the id")
        self.prefix = prefix


class IdPrefixTooShort(JournalError):
    def __init__(self, prefix: str, at_least: int) -> None:
        super().__init__(
            f"id prefix {prefix!r} is too short: give at least {at_least} characters "
            "(or the whole id)"
        )
        self.prefix, self.at_least = prefix, at_least


class EventIdReused(JournalError):
    """Exactly-once means the same event twice, not any event under a used id."""

    def __init__(self, event_id: str, task_id: str, differs: str) -> None:
        super().__init__(
            f"event id {event_id!r} was already used by task {task_id} ({differs}); "
            "nothing was created (the same event id with the same template and text "
            "returns that task; a new event needs a new id)"
        )
        self.event_id, self.task_id, self.differs = event_id, task_id, differs


class MalformedTaskRow(JournalError):
    """A task row that holds what pfar never writes (a hand edit, or a bug): it is reported
    and left alone, never guessed at or rewritten."""

    def __init__(self, task_id: str, field: str, problem: str) -> None:
        super().__init__(
            f"task {task_id}: its journal row is malformed: {field}: {problem}; the task "
            "is left as it is (`pfar cancel` ends it)"
        )
        self.task_id, self.field, self.problem = task_id, field, problem


class StaleConversation(JournalError):
    """A loop task's conversation moved on under a writer that had read an older end."""

    def __init__(self, task_id: str, after: int, last: int) -> None:
        super().__init__(
            f"task {task_id}: its conversation moved on (its last turn is {last}, "
            f"not {after}); nothing was appended"
        )
        self.task_id = task_id


class ToolError(PfarError):
    pass


class ResourceLocked(ToolError):
    """A call's resource lock (seed 001, 4.3) was not to be had within the timeout."""

    def __init__(self, what: str, holders: list[str], seconds: float) -> None:
        who = ", ".join(f"task {h.split(':')[0][:8]}" for h in holders) or "another task"
        super().__init__(
            f"Resource locked by another task: {what} is held by {who} "
            f"(waited {seconds:g} s); try again later"
        )
        self.what = what


class UnknownTool(ToolError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no tool named {name!r} is registered")
        self.name = name


class ToolTimeout(ToolError):
    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(f"tool {name} did not finish within {seconds:g}s")
        self.name, self.seconds = name, seconds


class ToolFailed(ToolError):
    pass


class ProviderError(PfarError):
    pass


class BadRequest(PfarError, ValueError):
    """A request (control socket or API call) whose field has the wrong type or shape
    (a ValueError too: callers that caught the untyped one keep working)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


class NotTheOwner(PfarError):
    """A control-socket request that does not come from the owner's `pfar` command: a
    process pfar started (a task's command, a step, an agent, a hook), another user,
    or a request without this boot's token."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"refused: {why}. The control socket takes requests only from the owner's "
            "`pfar` command (docs/security.md)"
        )
        self.why = why


class KernelNotRunning(PfarError):
    def __init__(self, home: str) -> None:
        super().__init__(f"no kernel is running on {home}; start one with `pfar run`")
        self.home = home


class KernelNotReady(KernelNotRunning):
    """A kernel holds the home but its control socket is not (or no longer) there."""

    def __init__(self, home: str) -> None:
        PfarError.__init__(
            self,
            f"the kernel on {home} is not answering on its control socket yet "
            "(it is starting or stopping); try again in a moment",
        )
        self.home = home


class ShuttingDown(PfarError):
    def __init__(self) -> None:
        super().__init__(
            "the kernel is shutting down and accepts no new work; try again when it has stopped"
        )


# -- sessions (chat-thread agent sessions; see pfar.journal.sessions) ---------


class SessionStoreError(VaultError):
    """The sessions table could not be read or written; the transaction was rolled back."""

    def __init__(self, path: str, what: str, cause: str) -> None:
        super().__init__(f"{path}: {what} failed ({cause}); nothing was changed")
        self.path, self.what, self.cause = path, what, cause


class SessionRecoveryFailed(VaultError):
    """Crash recovery stopped at a database error; sessions it did not reach are untouched."""

    def __init__(self, path: str, session_id: str, recovered: list[str], cause: str) -> None:
        done = (
            f"{len(recovered)} session(s) were recovered before it ({', '.join(recovered)})"
            if recovered
            else "no session was changed"
        )
        super().__init__(
            f"{path}: crash recovery failed at session {session_id} ({cause}); {done}; "
            "sessions still ACTIVE keep their state and are recovered at the next start"
        )
        self.path, self.session_id, self.recovered, self.cause = (
            path,
            session_id,
            recovered,
            cause,
        )


class UnknownSession(JournalError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}")
        self.session_id = session_id


class IllegalSessionTransition(JournalError):
    def __init__(self, session_id: str, src: str, dst: str) -> None:
        super().__init__(f"session {session_id}: cannot go from {src} to {dst}")
        self.session_id, self.src, self.dst = session_id, src, dst


class SessionStatusMismatch(JournalError):
    """Compare-and-set refused: the stored status is not the one the caller expected."""

    def __init__(self, session_id: str, expected: str, actual: str) -> None:
        super().__init__(
            f"session {session_id} is {actual}, not {expected}; nothing was changed "
            "(another process may have moved it: read it again)"
        )
        self.session_id, self.expected, self.actual = session_id, expected, actual


class SessionThreadBusy(JournalError):
    """A chat thread has at most one live (not TERMINATED) session."""

    def __init__(self, thread_id: str, session_id: str, status: str) -> None:
        super().__init__(
            f"thread {thread_id!r} already has a live session {session_id} ({status}); "
            "terminate it before creating another"
        )
        self.thread_id, self.session_id, self.status = thread_id, session_id, status


class InvalidSessionContext(JournalError):
    def __init__(self, session_id: str, problem: str) -> None:
        super().__init__(f"session {session_id}: {problem}; nothing was changed")
        self.session_id, self.problem = session_id, problem


class AnswerDoesNotFit(BadRequest):
    """The owner's answer is not one the question offers; nothing was changed."""

    def __init__(self, approval_id: str, answer: str, options: list[str]) -> None:
        problem = f"approval {approval_id[:8]} offers {', '.join(options)}; got {answer!r}"
        PfarError.__init__(self, f"{problem}; nothing was changed")
        self.field, self.problem = "decision", problem
        self.approval_id, self.answer, self.options = approval_id, answer, options
