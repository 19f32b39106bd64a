"""What `pfar audit verify` finds: a verdict on an audit log, its findings (where the log
is not as pfar wrote it) and notes (what is not a record, but not tampering either)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .audit_chain import AuditHead

FindingKind = Literal["edited", "removed", "inserted", "reordered", "damaged", "truncated"]
NoteKind = Literal["torn", "unchained", "missing"]


@dataclass(frozen=True, slots=True)
class Finding:
    """Where the log is not as pfar wrote it."""

    kind: FindingKind
    line: int | None
    n: int | None
    event: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "line": self.line,
            "n": self.n,
            "event": self.event,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class Note:
    """What is not a record but not tampering either (a torn write, lines from before)."""

    kind: NoteKind
    line: int | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "message": self.message}


@dataclass(frozen=True, slots=True)
class Verdict:
    path: Path
    exists: bool
    lines: int
    records: int
    head: AuditHead
    checkpoint: AuditHead | None
    findings: tuple[Finding, ...]
    notes: tuple[Note, ...]

    @property
    def intact(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "exists": self.exists,
            "intact": self.intact,
            "lines": self.lines,
            "records": self.records,
            "head": self.head.to_json(),
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "notes": [n.to_json() for n in self.notes],
        }
