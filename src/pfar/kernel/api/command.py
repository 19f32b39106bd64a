"""One op of the control socket: its typed arguments, the operator API verb it calls,
and the record that verb answers with (the table of them is requests.py)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .fields import parse_fields
from .wire import Wire

if TYPE_CHECKING:
    from .operator import Operator

A = TypeVar("A")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Command(Generic[A, R]):
    """An op of the control socket: the record its fields are parsed into, the verb it
    calls, the record the verb answers with, and whether a shutting-down kernel still
    takes it."""

    op: str
    arguments: type[A]
    verb: Callable[[Operator, A], Awaitable[R] | R]
    while_shutting_down: bool = False
    reply: Wire[R] = dataclasses.field(kw_only=True)

    def parse(self, body: Mapping[str, Any]) -> A:
        """The arguments in `body`, every field checked (BadRequest names a bad one)."""
        return parse_fields(self.arguments, body)

    async def run(self, operator: Operator, arguments: A) -> Any:
        """The verb's answer, as JSON values (the reply's schema)."""
        reply = self.verb(operator, arguments)
        return self.reply.dump(await reply if inspect.isawaitable(reply) else reply)

    def request(self, arguments: A) -> dict[str, Any]:
        """What a client sends for this command (enums go as their values)."""
        fields = dataclasses.fields(arguments)  # type: ignore[arg-type]
        return {"op": self.op, **{f.name: getattr(arguments, f.name) for f in fields}}
