"""Each start's recovery report as kept with its boot (`kernel_boots.report_json`): the
text the owner was sent, and each of its lines with the tasks the line is about.

Recovery writes it in the commit that queues the report to the owner (`TaskStore.
apply_recovery`), so a boot has its report kept exactly when the owner has it queued.
It is read back through `parse`, the one place it is read: a report that does not
parse (a newer pfar's, or a damaged one) is an `UnreadableReport`, shown as such and
never rewritten; a boot from before schema 14 has none (NULL).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from . import json_text

# what was written is what is read: no unknown field, no "3" taken for 3
_STRICT = ConfigDict(extra="forbid", strict=True)


MAX_LINKED = 100  # task ids kept for a line: a report after a flood stays small


class ReportLineKind(StrEnum):
    """What a line of the report says (recovery/report.py writes them in this order)."""

    vault = "vault"  # what the start found about the vault itself (a restore, a loss)
    retried = "retried"
    resumed = "resumed"
    at_cut_off_write = "at_cut_off_write"
    asked = "asked"  # resumed at a write in doubt: the owner is asked
    parked = "parked"  # in flight over kernel deaths in a row: the owner is asked
    approval_resent = "approval_resent"
    credential_resent = "credential_resent"
    abandoned = "abandoned"
    cancelled = "cancelled"
    paused = "paused"
    waiting = "waiting"
    blocked = "blocked"
    queued = "queued"
    malformed = "malformed"  # a task row left as it is
    sessions = "sessions"
    orphan_processes = "orphan_processes"
    orphan_sandboxes = "orphan_sandboxes"
    schedule = "schedule"
    channel_doubts = "channel_doubts"


@dataclass(frozen=True, slots=True)
class ReportLine:
    """One line of the report as the owner read it (without its leading " - "), and
    the tasks it is about (whole ids, at most MAX_LINKED; none for a line about no task)."""

    __pydantic_config__ = _STRICT
    kind: ReportLineKind
    text: str
    task_ids: tuple[str, ...] = ()
    # tasks the line counts beyond those kept (after a flood: the text has the count,
    # and the task list finds them)
    unlinked: int = 0


@dataclass(frozen=True, slots=True)
class StoredReport:
    """A start's recovery report: `text` exactly as the owner was sent it, and its lines."""

    __pydantic_config__ = _STRICT
    text: str
    lines: tuple[ReportLine, ...]
    form: Literal["report"] = "report"

    @property
    def tasks(self) -> tuple[str, ...]:
        """Every task the report names, once each, in the report's order."""
        return tuple(dict.fromkeys(t for line in self.lines for t in line.task_ids))


@dataclass(frozen=True, slots=True)
class UnreadableReport:
    """A kept report this pfar cannot read (`problem`: where and why); it is left as it is."""

    problem: str
    form: Literal["unreadable"] = "unreadable"


Kept = Annotated[StoredReport | UnreadableReport, Field(discriminator="form")]


@dataclass(frozen=True, slots=True)
class KeptBoot:
    """A kernel's start as the journal keeps it: when it started and ended, whether it
    ended by stopping (`clean`; False for one that was killed, or is running), and its
    recovery report (None for a boot from before reports were kept)."""

    boot_id: str
    started_at: str
    ended_at: str | None
    clean: bool
    report: Kept | None


@functools.cache
def _adapter() -> TypeAdapter[StoredReport]:
    return TypeAdapter(StoredReport)


def dumps(report: StoredReport) -> str:
    """The report as the JSON its column holds (compact, sorted, as every column)."""
    return json_text.dumps(_adapter().dump_python(report, mode="json"))


def parse(text: str | None) -> StoredReport | UnreadableReport | None:
    """A kept report read back; never raises (what does not parse is UnreadableReport)."""
    if text is None:
        return None
    try:
        return _adapter().validate_json(text, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the report"
        return UnreadableReport(f"{where}: {first['msg']}")
