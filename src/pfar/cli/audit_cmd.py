"""`pfar audit verify` and `pfar audit show`: the audit log, read from its file alone, with
or without a running kernel (it only appends)."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ..kernel.audit_chain import AuditHead
from ..kernel.audit_verify import Verdict, verify
from .output import err, home_of, out, table

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_SHOWN_APART = {"n", "prev", "at", "event", "task_id"}


@click.group()
def audit() -> None:
    """The audit log: what the kernel did, one hash-chained record a line
    (docs/vault.md, "The audit log")."""


@audit.command("verify")
@click.option(
    "--expect-count",
    type=click.IntRange(min=0),
    default=None,
    help="A checkpoint of the log's head: its record number. The log must reach it, so a "
    "tail cut off is found.",
)
@click.option(
    "--expect-digest",
    default=None,
    help="The checkpointed record's digest (64 hex digits); needs --expect-count.",
)
@click.option("--json", "as_json", is_flag=True, help="The verdict as one JSON object.")
@click.pass_context
def verify_cmd(
    ctx: click.Context, expect_count: int | None, expect_digest: str | None, as_json: bool
) -> None:
    """Walk the audit log's chain and name each record edited, removed, inserted or out
    of order. Exit 0 when it is intact, 1 when it is not, 2 when it cannot be read.

    \b
    Example:
        pfar audit verify
        pfar audit verify --expect-count 1042 --expect-digest 9f2c…
    """
    path = home_of(ctx).audit_log
    checkpoint = _checkpoint(expect_count, expect_digest)
    try:
        verdict = verify(path, checkpoint)
    except OSError as exc:
        err.print(f"error: {path}: cannot be read ({exc.strerror or exc})")
        raise SystemExit(2) from None
    if as_json:
        click.echo(json.dumps(verdict.to_json(), indent=2))
    else:
        _say(verdict)
    raise SystemExit(0 if verdict.intact else 1)


def _checkpoint(count: int | None, digest: str | None) -> AuditHead | None:
    if digest is not None and count is None:
        raise click.UsageError("--expect-digest names the digest of record --expect-count N")
    if digest is not None and not _HEX64.fullmatch(digest):
        raise click.UsageError(
            "--expect-digest takes the 64 hex digits of a SHA-256 (`pfar audit verify` "
            "prints the head's)"
        )
    if count is None:
        return None
    return AuditHead(count, (digest or "").lower())


def _say(v: Verdict) -> None:
    if not v.exists:
        for note in v.notes:
            out.print(f"note: {note.message}")
    elif v.intact:
        out.print(
            f"{v.path}: intact: {v.records} record(s) in {v.lines} line(s); head: record "
            f"{v.head.count}, digest {v.head.digest}"
        )
    else:
        out.print(f"{v.path}: NOT intact: {len(v.findings)} finding(s)")
    for finding in v.findings:
        out.print(f"  {finding.kind}: {finding.message}")
    if v.exists:
        for note in v.notes:
            out.print(f"note: {note.message}")
    if v.checkpoint is not None and v.intact:
        out.print(f"checkpoint: the log reaches record {v.checkpoint.count} as checkpointed")


@audit.command("show")
@click.option(
    "--last",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="The last N records that match (0: all of them).",
)
@click.option("--event", "events", multiple=True, help="Only this event (repeat for more).")
@click.option("--task", "task", default=None, help="Only records of this task (an id prefix).")
@click.option("--json", "as_json", is_flag=True, help="The records as stored, one a line.")
@click.pass_context
def show(
    ctx: click.Context, last: int, events: tuple[str, ...], task: str | None, as_json: bool
) -> None:
    """The audit log's records, oldest first: a table for people, the stored JSON lines
    for scripts.

    \b
    Example:
        pfar audit show --last 5
        pfar audit show --event task_created --task 0190c2f3 --json
    """
    path = home_of(ctx).audit_log
    if not path.exists():
        (err if as_json else out).print(f"no audit log yet: {path} does not exist", style="dim")
        return
    shown: deque[tuple[bytes, dict[str, Any]]] = deque(maxlen=last or None)
    skipped: list[int] = []
    try:
        for number, raw in _lines(path):
            record = _record(raw)
            if record is None:
                skipped.append(number)
            elif _matches(record, events, task):
                shown.append((raw, record))
    except OSError as exc:
        err.print(f"error: {path}: cannot be read ({exc.strerror or exc})")
        raise SystemExit(2) from None
    if as_json:
        for raw, _ in shown:
            click.echo(raw.decode("utf-8", "replace"))
    elif shown:
        rows = [_row(record) for _, record in shown]
        title = f"{path}: {len(rows)} record(s)"
        out.print(table(rows, ["n", "at", "event", "task_id", "detail"], title))
    else:
        out.print("no audit records" + (" match" if events or task else ""), style="dim")
    if skipped:
        err.print(
            f"note: {len(skipped)} line(s) are not JSON records (first: line {skipped[0]}): "
            "torn or damaged; `pfar audit verify` says which"
        )


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            yield number, raw.rstrip(b"\n")


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _matches(record: dict[str, Any], events: tuple[str, ...], task: str | None) -> bool:
    if events and record.get("event") not in events:
        return False
    return task is None or str(record.get("task_id") or "").startswith(task)


def _row(record: dict[str, Any]) -> dict[str, Any]:
    detail = " ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}"
        for k, v in record.items()
        if k not in _SHOWN_APART
    )
    at = str(record.get("at") or "")
    return {
        "n": record.get("n"),
        "at": at[:19].replace("T", " ") if "T" in at else at,
        "event": record.get("event"),
        "task_id": record.get("task_id"),
        "detail": detail,
    }
