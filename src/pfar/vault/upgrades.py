"""Data upgrades that SQL alone cannot write clearly, each run inside its migration's
transaction (schema.py). Frozen like the SQL files: they describe the rows as they
were then, and never import what the journal is now."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .driver import sqlite

_WORKING = ("Extracting", "Planning", "Executing", "Synthesizing")
_TERMINAL = ("Completed", "Failed", "Abandoned", "Cancelled")


def typed_states(conn: sqlite.Connection) -> None:
    """sessions_0006: `state_detail` from a loose dict to the state's typed record.

    A row whose detail is not a JSON object, or lacks what its state needs, is left
    exactly as it was: reading it then reports it by task id and field (MalformedTaskRow);
    an upgrade never guesses, and never overwrites what it cannot read.
    """
    rows = conn.execute("SELECT task_id, state, state_detail FROM task_journal").fetchall()
    for task_id, state, text in rows:
        try:
            detail = json.loads(text or "{}")
            payload = _payload(state, detail) if isinstance(detail, dict) else None
        except (ValueError, KeyError, TypeError):
            payload = None
        if payload is not None:
            conn.execute(
                "UPDATE task_journal SET state_detail = ? WHERE task_id = ?",
                (json.dumps(payload, separators=(",", ":"), ensure_ascii=False), task_id),
            )


def _payload(state: str, d: dict[str, Any]) -> dict[str, Any] | None:
    if "kind" in d:  # written by this pfar already
        return None
    if state in _TERMINAL:
        return {"kind": state}
    if state in _WORKING:
        return _working(state, d)
    if state == "Paused":
        rest = {k: v for k, v in d.items() if k != "paused_from"}
        return {"kind": "Paused", "then": _working(str(d["paused_from"]), rest)}
    if state == "Cancelling":
        cancelling = {"kind": "Cancelling", "cancelled_from": str(d["cancelled_from"])}
        return _put(cancelling, "step", _int(d.get("current_step")), 0)
    if state == "AwaitingApproval":
        out: dict[str, Any] = {"kind": "AwaitingApproval", "approval_id": str(d["approval_id"])}
        _put(out, "step", _int(d.get("step", d.get("current_step"))), 0)
        _put(out, "on_deny", d.get("on_deny"), "fail")
        _put(out, "resume_to", d.get("resume_state"), None)
        _put(out, "template_seen", d.get("template_seen"), None)
        _put(out, "approved", _grant(d), None)
        parked = d.get("parked_from")
        if isinstance(parked, dict):
            then = _working(str(parked["state"]), dict(parked.get("detail") or {}))
            out["in_flight"] = {"deaths": int(parked["deaths"]), "then": then}
        return out
    if state == "AwaitingCredential":
        out = {
            "kind": "AwaitingCredential",
            "prompt_id": str(d["prompt_id"]),
            "service": str(d["service"]),
            "prompt_message_id": str(d["prompt_message_id"]),
        }
        return _put(out, "step", _int(d.get("step", d.get("current_step"))), 0)
    return None


def _working(state: str, d: dict[str, Any]) -> dict[str, Any]:
    if state not in _WORKING:
        raise ValueError(state)
    out: dict[str, Any] = {"kind": state}
    if state == "Executing":
        _put(out, "current_step", _int(d.get("current_step")), 0)
        _put(out, "retry_step", _int(d.get("retry_step")), None)
        _put(out, "skip_step", _int(d.get("skip_step")), None)
        _put(out, "approved", _grant(d), None)
        # a workflow's decision stored before answers were bound to their question is
        # not carried over: with none, the trace's recovery check asks the owner again
    if d.get("pause_requested"):
        out["pause_requested"] = True
    request = d.get("llm_request")
    if isinstance(request, dict):
        out["llm_request"] = {"phase": str(request["phase"]), "sent_at": str(request["sent_at"])}
    return out


def _grant(d: dict[str, Any]) -> dict[str, Any] | None:
    step = _int(d.get("approved_step"))
    if step is None:
        return None
    grant: dict[str, Any] = {"step": step}
    return _put(grant, "args_sha256", d.get("approved_args"), None)


def _int(value: Any) -> int | None:
    """An integer field as it was stored; anything else (2.0, "3") leaves the row alone,
    never read as a default."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"not an integer: {value!r}")


def _put(out: dict[str, Any], key: str, value: Any, default: Any) -> dict[str, Any]:
    if value is not None and value != default:
        out[key] = value
    return out


# migration file name -> the upgrade that runs after its statements, in its transaction
AFTER: dict[str, Callable[[sqlite.Connection], None]] = {
    "sessions_0006_typed_states.sql": typed_states,
}
