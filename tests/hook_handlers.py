"""Python hook handlers for the tests: each records what it was given in `FIRED` (the
kernel under test runs in the test's own process) and answers as its name says."""

from __future__ import annotations

import asyncio
import time
from typing import Any

FIRED: list[dict[str, Any]] = []


def record(event: dict[str, Any]) -> None:
    FIRED.append(event)


def points() -> set[str]:
    return {e["hook"] for e in FIRED}


def block(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"decision": "block", "reason": "not today"}


def allow(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"decision": "allow", "reason": "fine by the owner's hook"}


def inject(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"context": "The staging database is read-only today."}


def upper_text(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"modify": {"text": str(event["text"]).upper()}}


def tag_learning(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"modify": {"content": "[checked] " + event["content"], "tags": ["checked"]}}


def only_first_learning(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"modify": {"learnings": ["Always run the linter first (from the hook)"]}}


def other_model(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"modify": {"model": "hooked-model"}}


def shorter_system(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"modify": {"system": "You are terse. " + event["system"]}}


def wrap_result(event: dict[str, Any]) -> dict[str, Any]:
    FIRED.append(event)
    return {"modify": {"result": {"text": "[seen by the hook] " + str(event["result"])}}}


def crash(event: dict[str, Any]) -> None:
    FIRED.append(event)
    raise RuntimeError("the handler's own bug")


def garbage(event: dict[str, Any]) -> Any:
    FIRED.append(event)
    return ["not", "a", "decision"]


def hang(event: dict[str, Any]) -> None:
    FIRED.append(event)
    time.sleep(1.5)


async def hang_async(event: dict[str, Any]) -> None:
    FIRED.append(event)
    await asyncio.sleep(60)
