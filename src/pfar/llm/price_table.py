"""pfar's own price list: dollars per million tokens of the common Anthropic and OpenAI
models, as the providers published them (`TAKEN`). `[llm.prices.MODEL]` in config
overrides a model's entry or adds one (a local model, a newer one, a negotiated rate).

A model is found by its name, or else by the longest name in the table that its name
starts with, then a "-" (a dated snapshot: "claude-sonnet-4-5-20250929" is priced as
"claude-sonnet-4-5"). A model found nowhere has no price: its calls are recorded with
their tokens and a cost that is unknown (not free), and `pfar costs` names it.

Cache reads and writes are not priced apart: the providers' usage as pfar reads it
counts tokens in and out, so a cached prompt is priced as input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """What a call of this many tokens in and out costs, in dollars."""
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


# the date these list prices were read from the providers' pricing pages
TAKEN: Final = "2025-11-30"

BUILT_IN: Final[Mapping[str, Price]] = {
    # Anthropic
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
    # OpenAI
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
    "gpt-5-nano": Price(0.05, 0.4),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1-nano": Price(0.1, 0.4),
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "o3": Price(2.0, 8.0),
    "o3-mini": Price(1.1, 4.4),
    "o4-mini": Price(1.1, 4.4),
}


def price_of(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of `model`: config's entry first, then pfar's table; None when neither
    names it."""
    for table in (overrides or {}, BUILT_IN):
        found = _lookup(model, table)
        if found is not None:
            return found
    return None


def _lookup(model: str, table: Mapping[str, Price]) -> Price | None:
    exact = table.get(model)
    if exact is not None:
        return exact
    best = max((name for name in table if model.startswith(name + "-")), key=len, default=None)
    return table[best] if best is not None else None
