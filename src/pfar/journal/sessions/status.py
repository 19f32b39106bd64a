"""A session's status and the moves between them: CREATED -> ACTIVE <-> PAUSED, and from
any of those to TERMINATED; each move passes its fault point once committed."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from ...errors import IllegalSessionTransition


class SessionStatus(StrEnum):
    CREATED = "CREATED"
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"

    @property
    def live(self) -> bool:
        """Holds its chat thread: every status but TERMINATED."""
        return self is not SessionStatus.TERMINATED


_S = SessionStatus

LEGAL_SESSION_MOVES: Final[Mapping[SessionStatus, frozenset[SessionStatus]]] = {
    _S.CREATED: frozenset({_S.ACTIVE, _S.TERMINATED}),
    _S.ACTIVE: frozenset({_S.PAUSED, _S.TERMINATED}),
    _S.PAUSED: frozenset({_S.ACTIVE, _S.TERMINATED}),
    _S.TERMINATED: frozenset(),
}


# the fault point each move passes once it is committed (faults.py)
MOVE_POINTS: Final[Mapping[SessionStatus, str]] = {
    _S.ACTIVE: "session_activated",
    _S.PAUSED: "session_paused",
    _S.TERMINATED: "session_terminated",
}
CREATED_POINT: Final = "session_created"


def is_legal_session_move(src: SessionStatus, dst: SessionStatus) -> bool:
    return dst in LEGAL_SESSION_MOVES[src]


def check_session_transition(session_id: str, src: SessionStatus, dst: SessionStatus) -> None:
    """Raise IllegalSessionTransition unless `src -> dst` is a legal move."""
    if not is_legal_session_move(src, dst):
        raise IllegalSessionTransition(session_id, src.value, dst.value)
