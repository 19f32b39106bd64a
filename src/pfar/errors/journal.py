"""The journal and its store: unknown records, refused transitions and writes."""

from __future__ import annotations

from .base import PfarError
from .vault import VaultIOError


class JournalError(PfarError):
    code = "journal"


class WriteRefused(JournalError):
    """The store refused one write (a constraint the write broke); nothing of it was
    written, and the writes committed beside it stand."""

    code = "write_refused"


class StoreUnavailable(VaultIOError):
    """The journal's database cannot be reached (a PostgreSQL server down, a connection
    lost): nothing more is written until the kernel starts again."""

    code = "store_unavailable"


class UnknownTask(JournalError):
    code = "unknown_task"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no task with id {task_id!r}; `pfar tasks` lists them")
        self.task_id = task_id


class UnknownApproval(JournalError):
    code = "unknown_approval"

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"no approval with id {approval_id!r}; `pfar approvals` lists them")
        self.approval_id = approval_id


class UnknownCredentialPrompt(JournalError):
    code = "unknown_credential_prompt"

    def __init__(self, prompt_id: str) -> None:
        super().__init__(
            f"no credential prompt with id {prompt_id!r}; `pfar approvals` lists pending prompts"
        )
        self.prompt_id = prompt_id


class IllegalTransition(JournalError):
    code = "illegal_transition"

    def __init__(self, task_id: str, src: str, dst: str) -> None:
        super().__init__(f"task {task_id}: cannot go from {src} to {dst}")
        self.task_id, self.src, self.dst = task_id, src, dst


class TaskStateRefused(JournalError):
    """The owner asked to cancel, pause or resume a task whose state does not allow it."""

    code = "task_state_refused"

    def __init__(self, task_id: str, state: str, action: str, why: str) -> None:
        super().__init__(
            f"task {task_id} is {state}: {why}, so it cannot be {action}; nothing was changed"
        )
        self.task_id, self.state, self.action = task_id, state, action


class AlreadyDecided(JournalError):
    code = "already_decided"

    def __init__(self, what: str, item_id: str, status: str) -> None:
        super().__init__(f"{what} {item_id} is already {status}; nothing was changed")
        self.item_id, self.status = item_id, status


class AmbiguousId(JournalError):
    code = "ambiguous_id"

    def __init__(self, what: str, prefix: str) -> None:
        super().__init__(f"{prefix!r} matches more than one {what}; give more of the id")
        self.prefix = prefix


class IdPrefixTooShort(JournalError):
    code = "id_prefix_too_short"

    def __init__(self, prefix: str, at_least: int) -> None:
        super().__init__(
            f"id prefix {prefix!r} is too short: give at least {at_least} characters "
            "(or the whole id)"
        )
        self.prefix, self.at_least = prefix, at_least


class EventIdReused(JournalError):
    """Exactly-once means the same event twice, not any event under a used id."""

    code = "event_id_reused"

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

    code = "malformed_task_row"

    def __init__(self, task_id: str, field: str, problem: str) -> None:
        super().__init__(
            f"task {task_id}: its journal row is malformed: {field}: {problem}; the task "
            "is left as it is (`pfar cancel` ends it)"
        )
        self.task_id, self.field, self.problem = task_id, field, problem


class MalformedRow(JournalError):
    """A journal row (no task's: see MalformedTaskRow) holding a value no pfar writes (a
    newer pfar's, a hand edit): reported, naming the row, and left as it is."""

    code = "malformed_row"

    def __init__(self, table: str, row: str, field: str, value: str) -> None:
        super().__init__(
            f"{table} {row}: its {field} {value!r} is none this pfar knows; the row is "
            "left as it is (a newer pfar may have written it)"
        )
        self.table, self.row, self.field, self.value = table, row, field, value


class UnknownMessageKey(JournalError):
    """Text that is no kind of key pfar writes for a message to the owner."""

    code = "unknown_message_key"

    def __init__(self, key: str) -> None:
        super().__init__(
            f"message key {key!r} is none of the kinds pfar writes "
            "(approval:ID:N, result:TASK, reply:CHANNEL:EVENT@ID, ...)"
        )
        self.key = key


class StaleConversation(JournalError):
    """A loop task's conversation moved on under a writer that had read an older end."""

    code = "stale_conversation"

    def __init__(self, task_id: str, after: int, last: int) -> None:
        super().__init__(
            f"task {task_id}: its conversation moved on (its last turn is {last}, "
            f"not {after}); nothing was appended"
        )
        self.task_id = task_id
