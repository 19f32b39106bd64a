"""Chat-thread agent sessions (pfar.journal.sessions): their store and state machine."""

from __future__ import annotations

from .journal import JournalError
from .vault import VaultError


class SessionStoreError(VaultError):
    """The sessions table could not be read or written; the transaction was rolled back."""

    code = "session_store"

    def __init__(self, path: str, what: str, cause: str) -> None:
        super().__init__(f"{path}: {what} failed ({cause}); nothing was changed")
        self.path, self.what, self.cause = path, what, cause


class SessionRecoveryFailed(VaultError):
    """Crash recovery stopped at a database error; sessions it did not reach are untouched."""

    code = "session_recovery_failed"

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
    code = "unknown_session"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}")
        self.session_id = session_id


class IllegalSessionTransition(JournalError):
    code = "illegal_session_transition"

    def __init__(self, session_id: str, src: str, dst: str) -> None:
        super().__init__(f"session {session_id}: cannot go from {src} to {dst}")
        self.session_id, self.src, self.dst = session_id, src, dst


class SessionStatusMismatch(JournalError):
    """Compare-and-set refused: the stored status is not the one the caller expected."""

    code = "session_status_mismatch"

    def __init__(self, session_id: str, expected: str, actual: str) -> None:
        super().__init__(
            f"session {session_id} is {actual}, not {expected}; nothing was changed "
            "(another process may have moved it: read it again)"
        )
        self.session_id, self.expected, self.actual = session_id, expected, actual


class SessionThreadBusy(JournalError):
    """A chat thread has at most one live (not TERMINATED) session."""

    code = "session_thread_busy"

    def __init__(self, thread_id: str, session_id: str, status: str) -> None:
        super().__init__(
            f"thread {thread_id!r} already has a live session {session_id} ({status}); "
            "terminate it before creating another"
        )
        self.thread_id, self.session_id, self.status = thread_id, session_id, status


class InvalidSessionContext(JournalError):
    code = "invalid_session_context"

    def __init__(self, session_id: str, problem: str) -> None:
        super().__init__(f"session {session_id}: {problem}; nothing was changed")
        self.session_id, self.problem = session_id, problem
