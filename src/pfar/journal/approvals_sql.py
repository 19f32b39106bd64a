"""SQL for `pending_approvals` (spec §5) and `pending_credentials` (spec §6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .question_kinds import read_question_kind
from .records import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    CredentialStatus,
    dumps,
    loads,
)
from .tx import Tx

_A_COLUMNS = (
    "approval_id, task_id, action_type, description, data_preview, taint_level, target_sink, "
    "tool, step, created_at, expires_at, status, options_json, decision, decided_at, prompts_sent, "
    "args_sha256, decided_by"
)
_C_COLUMNS = (
    "prompt_id, task_id, service, credential_type, instructions, vault_ref, message_id, "
    "created_at, expires_at, status, step, received_at, received_by"
)


def _approval(row: Sequence[Any]) -> ApprovalRecord:
    """A `pending_approvals` row: a kind no pfar this old asks is kept as it is (the
    question still expires, is answered or withdrawn as one with no kind of its own)."""
    return ApprovalRecord(
        approval_id=row[0],
        task_id=row[1],
        action_type=read_question_kind(row[2]),
        description=row[3],
        data_preview=row[4],
        taint_level=row[5],
        target_sink=row[6],
        tool=row[7],
        step=row[8],
        created_at=row[9],
        expires_at=row[10],
        status=ApprovalStatus(row[11]),
        options=loads(row[12]),
        decision=row[13],
        decided_at=row[14],
        prompts_sent=int(row[15]),
        args_sha256=row[16],
        decided_by=row[17],
    )


def _credential(row: Sequence[Any]) -> CredentialPromptRecord:
    return CredentialPromptRecord(
        prompt_id=row[0],
        task_id=row[1],
        service=row[2],
        credential_type=row[3],
        instructions=row[4],
        vault_ref=row[5],
        message_id=row[6],
        created_at=row[7],
        expires_at=row[8],
        status=CredentialStatus(row[9]),
        step=row[10],
        received_at=row[11],
        received_by=row[12],
    )


def insert_approval_txn(conn: Tx, a: ApprovalRecord) -> None:
    conn.execute(
        f"INSERT INTO pending_approvals ({_A_COLUMNS}) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            a.approval_id,
            a.task_id,
            str(a.action_type),
            a.description,
            a.data_preview,
            a.taint_level,
            a.target_sink,
            a.tool,
            a.step,
            a.created_at,
            a.expires_at,
            a.status.value,
            dumps(a.options),
            a.decision,
            a.decided_at,
            a.prompts_sent,
            a.args_sha256,
            a.decided_by,
        ),
    )


def get_approval(conn: Tx, approval_id: str) -> ApprovalRecord | None:
    row = conn.execute(
        f"SELECT {_A_COLUMNS} FROM pending_approvals WHERE approval_id = ?", (approval_id,)
    ).fetchone()
    return None if row is None else _approval(row)


def approvals_for_task(conn: Tx, task_id: str) -> list[ApprovalRecord]:
    rows = conn.execute(
        f"SELECT {_A_COLUMNS} FROM pending_approvals WHERE task_id = ? ORDER BY created_at",
        (task_id,),
    ).fetchall()
    return [_approval(r) for r in rows]


def approvals_with_status(
    conn: Tx, statuses: Sequence[str], limit: int = 1000
) -> list[ApprovalRecord]:
    marks = ", ".join("?" for _ in statuses)
    rows = conn.execute(
        f"SELECT {_A_COLUMNS} FROM pending_approvals WHERE status IN ({marks}) "
        "ORDER BY created_at LIMIT ?",
        (*statuses, limit),
    ).fetchall()
    return [_approval(r) for r in rows]


def decide_approval_txn(
    conn: Tx,
    approval_id: str,
    status: ApprovalStatus,
    decision: str,
    at: str,
    by: str,
) -> None:
    conn.execute(
        "UPDATE pending_approvals SET status = ?, decision = ?, decided_at = ?, decided_by = ? "
        "WHERE approval_id = ?",
        (status.value, decision, at, by, approval_id),
    )


def count_prompt_txn(conn: Tx, approval_id: str) -> None:
    conn.execute(
        "UPDATE pending_approvals SET prompts_sent = prompts_sent + 1 WHERE approval_id = ?",
        (approval_id,),
    )


def insert_credential_txn(conn: Tx, c: CredentialPromptRecord) -> None:
    conn.execute(
        f"INSERT INTO pending_credentials ({_C_COLUMNS}) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            c.prompt_id,
            c.task_id,
            c.service,
            c.credential_type,
            c.instructions,
            c.vault_ref,
            c.message_id,
            c.created_at,
            c.expires_at,
            c.status.value,
            c.step,
            c.received_at,
            c.received_by,
        ),
    )


def get_credential(conn: Tx, prompt_id: str) -> CredentialPromptRecord | None:
    row = conn.execute(
        f"SELECT {_C_COLUMNS} FROM pending_credentials WHERE prompt_id = ?", (prompt_id,)
    ).fetchone()
    return None if row is None else _credential(row)


def credentials_with_status(
    conn: Tx, statuses: Sequence[str], limit: int = 1000
) -> list[CredentialPromptRecord]:
    marks = ", ".join("?" for _ in statuses)
    rows = conn.execute(
        f"SELECT {_C_COLUMNS} FROM pending_credentials WHERE status IN ({marks}) "
        "ORDER BY created_at LIMIT ?",
        (*statuses, limit),
    ).fetchall()
    return [_credential(r) for r in rows]


def credentials_for_task(conn: Tx, task_id: str) -> list[CredentialPromptRecord]:
    rows = conn.execute(
        f"SELECT {_C_COLUMNS} FROM pending_credentials WHERE task_id = ? ORDER BY created_at",
        (task_id,),
    ).fetchall()
    return [_credential(r) for r in rows]


def set_credential_status_txn(
    conn: Tx, prompt_id: str, status: CredentialStatus, at: str, by: str
) -> None:
    conn.execute(
        "UPDATE pending_credentials SET status = ?, received_at = ?, received_by = ? "
        "WHERE prompt_id = ?",
        (status.value, at, by, prompt_id),
    )


def set_credential_message_txn(conn: Tx, prompt_id: str, message_id: str) -> None:
    conn.execute(
        "UPDATE pending_credentials SET message_id = ? WHERE prompt_id = ?",
        (message_id, prompt_id),
    )


def next_deadline(conn: Tx) -> str | None:
    """The earliest expiry among pending approvals and prompts (None when nothing waits)."""
    row = conn.execute(
        "SELECT min(e) FROM ("
        "SELECT min(expires_at) AS e FROM pending_approvals WHERE status = 'pending' "
        "UNION ALL "
        "SELECT min(expires_at) AS e FROM pending_credentials WHERE status = 'pending'"
        ") AS deadlines"
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def withdraw_for_task_txn(conn: Tx, task_id: str, at: str) -> tuple[list[str], list[str]]:
    """Withdraw every question still pending for `task_id` (its task is being cancelled):
    (approval ids, credential prompt ids) withdrawn."""
    approvals = [
        str(r[0])
        for r in conn.execute(
            "SELECT approval_id FROM pending_approvals WHERE task_id = ? AND status = 'pending'",
            (task_id,),
        )
    ]
    prompts = [
        str(r[0])
        for r in conn.execute(
            "SELECT prompt_id FROM pending_credentials WHERE task_id = ? AND status = 'pending'",
            (task_id,),
        )
    ]
    conn.execute(
        "UPDATE pending_approvals SET status = ?, decided_at = ? "
        "WHERE task_id = ? AND status = 'pending'",
        (ApprovalStatus.withdrawn.value, at, task_id),
    )
    conn.execute(
        "UPDATE pending_credentials SET status = ?, received_at = ? "
        "WHERE task_id = ? AND status = 'pending'",
        (CredentialStatus.withdrawn.value, at, task_id),
    )
    return approvals, prompts
