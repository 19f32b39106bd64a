"""Ids as people type them: a full id, or an unambiguous prefix of a few characters."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import AmbiguousId, IdPrefixTooShort, PfarError
from .tx import Tx

MIN_PREFIX = 4


def resolve_id(
    conn: Tx,
    table: str,
    column: str,
    given: str,
    what: str,
    unknown: Callable[[str], PfarError],
) -> str:
    """The full id in `table.column` that `given` names (both are pfar's own, not input)."""
    if conn.execute(f"SELECT 1 FROM {table} WHERE {column} = ?", (given,)).fetchone():
        return given
    if len(given) < MIN_PREFIX:
        # said whether or not some id starts with it: "no task with id 'd'" would be
        # wrong as often as not, and a short prefix is refused either way
        raise IdPrefixTooShort(given, MIN_PREFIX)
    found = [
        str(r[0])
        for r in conn.execute(
            f"SELECT {column} FROM {table} WHERE {column} >= ? AND {column} < ? LIMIT 2",
            (given, given + "\uffff"),
        )
    ]
    if len(found) == 1:
        return found[0]
    if found:
        raise AmbiguousId(what, given)
    raise unknown(given)
