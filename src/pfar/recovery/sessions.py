"""Session crash recovery: at start, an ACTIVE session means the kernel that ran it died.

A kernel that stops cleanly pauses or terminates its sessions, so a session
still ACTIVE when a kernel starts was cut off by a crash. `CrashRecovery.recover`
ends the agent process that kernel left behind (if it is the very same process
still running: pid plus start time) and moves the session ACTIVE -> PAUSED with
`recovered_at` (and `ended_orphan_pid`, when it ended one) in its context, so the
owner can resume it. Run it only while holding the home's lock (`HomeLock`):
another running kernel's ACTIVE sessions are not crashed.

Each session is recovered in its own write (a commit of the session store's
writer, passing the `session_paused` fault point): a database error stops
recovery with `SessionRecoveryFailed`, which names the sessions already
recovered; every other session is left exactly as it was, to be recovered at the
next start. Calling `recover` again finds nothing to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import (
    SessionRecoveryFailed,
    SessionStatusMismatch,
    SessionStoreError,
    UnknownSession,
)
from ..journal.records import now_rfc3339
from ..journal.sessions import SessionRecord, SessionStatus
from ..journal.store import SessionStore
from ..tools.processes import end_group_if_same

log = logging.getLogger("pfar.sessions")

EndProcess = Callable[[dict[str, Any]], bool]
"""Ends a recorded process if it still runs; True when it ended one."""


class CrashRecovery:
    def __init__(self, manager: SessionStore) -> None:
        self._manager = manager

    async def detect_crashed_sessions(self) -> list[SessionRecord]:
        """Sessions left ACTIVE: their kernel did not stop them, so it crashed."""
        return await self._manager.list(status=SessionStatus.ACTIVE)

    async def recover(
        self, now: str | None = None, end_process: EndProcess | None = None
    ) -> list[str]:
        """Pause every crashed session; return the ids of those it paused (oldest first).

        `now` is the RFC 3339 `recovered_at` to record (default: the current time);
        `end_process` ends a recorded agent process (default: `end_group_if_same`,
        SIGKILL to its process group if that very process still runs).
        """
        end = end_group_if_same if end_process is None else end_process
        at = now_rfc3339() if now is None else now
        recovered: list[str] = []
        for rec in await self.detect_crashed_sessions():
            extra: dict[str, Any] = {"recovered_at": at}
            if rec.process is not None and end(rec.process):
                extra["ended_orphan_pid"] = rec.process.get("pid")
                log.info(
                    "session %s: ended its orphaned agent process %s",
                    rec.session_id,
                    rec.process.get("pid"),
                )
            try:
                await self._manager.transition(
                    rec.session_id,
                    SessionStatus.ACTIVE,
                    SessionStatus.PAUSED,
                    context=extra,
                    process=None,
                )
            except (SessionStatusMismatch, UnknownSession) as exc:
                # moved (or resumed) by someone else since we listed it: not ours to pause
                log.info("session %s: left as it is (%s)", rec.session_id, exc)
                continue
            except SessionStoreError as exc:
                raise SessionRecoveryFailed(
                    self._manager.path, rec.session_id, list(recovered), exc.cause
                ) from exc
            recovered.append(rec.session_id)
            log.info("session %s: ACTIVE at start, paused (recovered at %s)", rec.session_id, at)
        return recovered


def recovery_message(ids: Sequence[str]) -> str:
    """What to tell the owner: "Recovered N sessions after crash"; "" when there were none."""
    n = len(ids)
    if n == 0:
        return ""
    return f"Recovered {n} {'session' if n == 1 else 'sessions'} after crash"
