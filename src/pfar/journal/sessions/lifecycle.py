"""The session state machine over a `SessionManager`: checked, compare-and-set moves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .manager import SessionManager
from .record import KEEP, ProcessArg, SessionRecord
from .status import SessionStatus


class SessionLifecycle:
    """The session state machine over a `SessionManager`: checked, compare-and-set moves."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager

    async def transition(
        self,
        session_id: str,
        from_status: SessionStatus,
        to_status: SessionStatus,
        *,
        context: Mapping[str, Any] | None = None,
        process: ProcessArg = KEEP,
    ) -> SessionRecord:
        """Move the session from `from_status` to `to_status` in one transaction.

        Raises IllegalSessionTransition for a move the state machine forbids, and
        SessionStatusMismatch when the stored status is not `from_status` (nothing is
        changed then). `context` is merged and `process` set in the same transaction;
        leaving ACTIVE clears the process.
        """
        return await self.manager.transition(
            session_id, from_status, to_status, context=context, process=process
        )
