"""What `pfar audit verify` keeps of a log as it walks it (the records the chain stands
on, the numbers missing, the lines that are not records) and what it finds once the
walk has reached the end: lines left over, records missing, a checkpoint not reached.
audit_verify.py walks the log line by line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .audit_chain import GENESIS, AuditHead
from .audit_verdict import Finding, FindingKind, Note


@dataclass(slots=True)
class Seen:
    """A record as the walk keeps it."""

    n: int
    line: int
    event: str
    digest: str
    prev: str

    def named(self) -> str:
        return f"record {self.n} (line {self.line}, {self.event})"


START = Seen(0, 0, "", GENESIS, GENESIS)


@dataclass(slots=True)
class Gap:
    """Numbers missing where the chain went on: removed, unless found later."""

    lo: int
    hi: int
    before: Seen  # the record the gap follows
    at: int  # the line the first record after it stands on
    before_digest: str  # what the first missing record's prev must be
    next_prev: str  # what the last missing record's digest must be
    damaged: list[int] = field(default_factory=list)  # lines not records where they stood


@dataclass(slots=True)
class Odd:
    """A line that is not a record."""

    line: int
    digest: str
    unchained: bool  # a JSON object from before the chain
    newline: bool


class Findings:
    """What a walk found: findings (something was done to the log) and notes (what a
    crash or an older pfar leaves, not a finding)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.notes: list[Note] = []

    def find(
        self, kind: FindingKind, line: int | None, n: int | None, event: str | None, msg: str
    ) -> None:
        self.findings.append(Finding(kind, line, n, event, msg))

    def about(self, kind: FindingKind, record: Seen, msg: str) -> None:
        self.find(kind, record.line, record.n, record.event, msg)


def odd_at_end(f: Findings, odd: list[Odd], base: Seen) -> None:
    """Lines that are not records after the last one: the last is a torn write (a
    crash, or a write under way); lines from before the chain when there is no
    record; anything else was put there."""
    if not odd:
        return
    from_before = base is START
    *earlier, last = odd
    unchained = [o.line for o in odd if o.unchained and from_before]
    torn = last.line not in unchained and not (last.unchained and last.newline)
    for o in earlier:
        if o.line not in unchained:
            f.find(
                "inserted",
                o.line,
                None,
                None,
                f"line {o.line} is not an audit record: inserted or damaged",
            )
    if unchained:
        f.notes.append(
            Note(
                "unchained",
                unchained[0],
                f"{lines_text(unchained)} were written before the audit log was chained (an "
                "older pfar): they cannot be verified; the next start chains the log "
                "from there",
            )
        )
    if torn:
        f.notes.append(
            Note(
                "torn",
                last.line,
                f"line {last.line}, the last, is not a whole record: a write cut off (a "
                "crash, or a kernel writing it right now); the next start records it. A "
                "checkpoint tells this from a tail cut on purpose",
            )
        )
    elif last.line not in unchained:
        f.find(
            "inserted",
            last.line,
            None,
            None,
            f"line {last.line}, the last, is a JSON object but not a chained record: "
            "appended by something other than pfar",
        )


def missing_records(f: Findings, gap: Gap) -> None:
    single = gap.lo == gap.hi
    which = f"record {gap.lo}" if single else f"records {gap.lo}–{gap.hi}"
    if gap.damaged:
        f.find(
            "damaged",
            gap.damaged[0],
            gap.lo,
            None,
            f"{lines_text(gap.damaged)}: not a whole record, where {which} should be: edited "
            "or damaged",
        )
        return
    where = f"between {gap.before.named()} and the record at line {gap.at}"
    if gap.before is START:
        where = f"before the record at line {gap.at}"
    f.find(
        "removed",
        gap.at,
        gap.lo,
        None,
        f"{which} {'is' if single else 'are'} missing {where}: removed",
    )


def compare_checkpoint(
    f: Findings, cp: AuditHead | None, head: Seen, at_checkpoint: Seen | None
) -> None:
    if cp is None or cp.count == 0:
        return
    if at_checkpoint is None and head.n < cp.count:
        f.find(
            "truncated",
            None,
            cp.count,
            None,
            f"the log ends at record {head.n}"
            + (f" (line {head.line})" if head.line else "")
            + f", but the checkpoint names record {cp.count}: "
            + (
                f"record {cp.count} was"
                if cp.count == head.n + 1
                else f"records {head.n + 1}–{cp.count} were"
            )
            + " cut from its end",
        )
    elif at_checkpoint is not None and cp.digest and at_checkpoint.digest != cp.digest:
        at = at_checkpoint
        f.about(
            "edited",
            at,
            f"{at.named()} is not the record the checkpoint names (its digest is "
            f"{at.digest[:16]}…, the checkpoint's {cp.digest[:16]}…): the log was "
            "rewritten up to there",
        )


def missing_file(f: Findings, cp: AuditHead | None, path: Path) -> None:
    if cp is not None and cp.count:
        f.find(
            "truncated",
            None,
            cp.count,
            None,
            f"{path} does not exist, but the checkpoint names record {cp.count}: "
            "the log was removed",
        )
    else:
        f.notes.append(Note("missing", None, f"{path} does not exist (yet)"))


def order(f: Finding) -> tuple[int, int]:
    return (f.line if f.line is not None else 1 << 62, f.n or 0)


def lines_text(lines: list[int]) -> str:
    if len(lines) == 1:
        return f"line {lines[0]}"
    if lines == list(range(lines[0], lines[-1] + 1)):
        return f"lines {lines[0]}–{lines[-1]}"
    return "lines " + ", ".join(map(str, lines))
