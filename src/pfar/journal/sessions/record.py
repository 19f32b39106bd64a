"""One session as a record, and what its row may hold: a plain thread id, and `context`
and `process` as JSON objects that read back equal."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Literal, TypeAlias

from ...errors import BadRequest, InvalidSessionContext
from ..json_text import JsonObject
from .status import SessionStatus


class _Keep(Enum):
    KEEP = "keep"


KEEP: Final = _Keep.KEEP
"""Leave `process` as it is (the default of `update` and `transition`)."""

Keep: TypeAlias = Literal[_Keep.KEEP]
ProcessArg: TypeAlias = dict[str, Any] | Keep | None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One `sessions` row."""

    session_id: str
    project_path: str
    thread_id: str
    status: SessionStatus
    context: JsonObject
    created_at: str
    updated_at: str
    process: JsonObject | None

    @property
    def runs(self) -> int:
        """How many times its agent was started (`context["runs"]`, which pfar keeps)."""
        runs = self.context.get("runs", 0)
        return runs if isinstance(runs, int) else 0


# A chat platform's thread id: it ends up in the agent's argv and its log, so it is
# plain (no shell or option syntax), and bounded.
THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+\-]{0,127}")


def check_thread_id(thread_id: str) -> str:
    if not isinstance(thread_id, str) or not THREAD_ID.fullmatch(thread_id):
        raise BadRequest(
            "thread_id",
            f"{thread_id!r} is not a thread id: use 1 to 128 letters, digits and _ . : @ + - "
            "(starting with a letter or digit)",
        )
    return thread_id


def json_object(session_id: str, what: str, value: object) -> str:
    """`value` as JSON text, if it is a JSON object that reads back equal; else refuse it."""
    if not isinstance(value, dict):
        raise InvalidSessionContext(
            session_id, f"{what} must be a JSON object (a dict), not {type(value).__name__}"
        )
    try:
        text = json.dumps(
            value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise InvalidSessionContext(session_id, f"{what} is not plain JSON ({exc})") from None
    if json.loads(text) != value:
        raise InvalidSessionContext(
            session_id,
            f"{what} is not plain JSON: it would not read back the same "
            "(non-string keys, tuples or other non-JSON types)",
        )
    return text
