"""Dollars as pfar shows them to its owner: to the cent, or to a hundredth of a cent
below one dollar (a model call often costs less than one)."""

from __future__ import annotations


def dollars(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 1 or usd == 0 else f"${usd:.4f}"
