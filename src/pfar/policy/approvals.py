"""Which writes need the owner's approval, and what a denial does."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..journal.question_kinds import QuestionKind
from ..journal.records import Semantics

TAINTED = "Raw"


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    require: frozenset[str]  # tools whose writes always need approval ("*" = every write)
    tainted_writes: bool  # a write after untrusted (Raw) data was read needs approval
    on_deny: Literal["skip", "fail"]  # "skip" the step or "fail" the task


@dataclass(frozen=True, slots=True)
class ApprovalNeed:
    action_type: QuestionKind  # spec §5.1: tainted_write or write
    reason: str
    taint_level: str | None


def approval_needed(
    rule: ApprovalRule, tool: str, semantics: Semantics, prior_labels: Iterable[str]
) -> ApprovalNeed | None:
    if semantics is not Semantics.Write:
        return None
    labels = set(prior_labels)
    if tool in rule.require or "*" in rule.require:
        taint = TAINTED if TAINTED in labels else "Extracted"
        return ApprovalNeed(
            QuestionKind.tainted_write if taint == TAINTED else QuestionKind.write,
            f"the template requires approval for {tool}",
            taint,
        )
    if rule.tainted_writes and TAINTED in labels:
        return ApprovalNeed(
            QuestionKind.tainted_write, "this write follows untrusted outside data", TAINTED
        )
    return None
