"""The statements that differ between the journal's backends, and how each tells its errors.

Everything else is one SQL text for both (`?` placeholders, `ON CONFLICT DO NOTHING`,
`RETURNING`): a backend's dialect names only what its SQL says otherwise, and how a
driver error reads as pfar's (a refused write, a busy database, a lost connection).
"""

from __future__ import annotations

from enum import Enum


class Failure(Enum):
    """What a driver error means to the group commit."""

    REFUSED = "refused"  # this write only (a constraint): its neighbours commit
    BUSY = "busy"  # no transaction could begin: nothing was written
    STOP = "stop"  # I/O, a damaged page, a lost connection: the writer stops (fail-stop)


class Dialect:
    """A backend's statements. Subclasses set every attribute."""

    name: str
    # starts a write transaction that holds the journal's write lock from its first
    # statement: the event bus and the owner's outbox are numbered in commit order
    # (statements run one after the other: a pipeline takes one at a time)
    begin: tuple[str, ...]
    # FROM clauses of the two reads recovery makes at every start (SQLite is told the
    # partial index to use; PostgreSQL's planner picks it)
    unfinished_tasks: str
    started_steps: str
    # whether a task's payload holds a standing pause request (a truth value), and the
    # condition that it does not
    pause_requested: str
    no_pause_requested: str
    # the directory of a workflow task's trigger event
    trigger_directory: str
    # a condition: the text a task was started with (its trigger event's) holds the next
    # parameter, a LIKE pattern escaped with `\`, with case folded on both sides
    input_text_like: str
    # the next number of the owner's outbox, as a value in an INSERT
    # (database-generated on PostgreSQL)
    next_outbox_seq: str
    # the bus's high-water mark: the number of the last event ever appended (0: none)
    bus_high_water: str
    # a subscriber's offset, never moved back
    ack_offset: str

    def failure(self, exc: BaseException) -> Failure | None:
        """What `exc` means to a commit, or None when it is not this driver's error."""
        raise NotImplementedError

    def without_fields(self, column: str, fields: tuple[str, ...]) -> str:
        """`column`'s JSON object without the top-level `fields` (pfar's own names)."""
        raise NotImplementedError

    def with_object(self, column: str, field: str, keys: tuple[str, ...]) -> str:
        """`column`'s JSON object with `field` set to an object of `keys`, whose text
        values are the statement's next parameters."""
        raise NotImplementedError
