"""The owner's answers: a closed union, parsed once where an answer comes in.

Every surface (the CLI through the control socket, later chat buttons and the web
console) turns what the owner typed or pressed into one of these records with
`parse_answer`; the kernel checks that it fits the question (its options), and the
task's runner applies it with one dispatch over the variants. Nothing past the
edge compares answer strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import BadRequest


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acted and through which surface: kept with every answer in the journal.

    `surface` is where the words came in ("cli", "stdin", "telegram", "slack",
    "whatsapp", "console", "api"); `who` what that surface knows of the person (the
    CLI's uid and pid from the socket's peer credentials, a chat's user id)."""

    surface: str
    who: str = ""

    def __str__(self) -> str:
        return f"{self.surface} ({self.who})" if self.who else self.surface

    @classmethod
    def parse(cls, text: str) -> Actor:
        """The actor again from its text (`str(actor)`, as the journal keeps it)."""
        surface, sep, who = text.partition(" (")
        if sep and who.endswith(")"):
            return cls(surface, who[:-1])
        return cls(text)


# the operator API called from Python in the kernel's own process (tests, embedding)
IN_PROCESS = Actor("api", "in-process")


@dataclass(frozen=True, slots=True)
class Approve:
    """Yes to the question: its first option (run the step, continue, resume, ...)."""

    kind: Literal["approve"] = "approve"


@dataclass(frozen=True, slots=True)
class Deny:
    """No to the question: its own way of saying no (deny, fail, or abandon)."""

    kind: Literal["deny"] = "deny"


@dataclass(frozen=True, slots=True)
class Retry:
    """Run the step again (it failed, or it may or may not have had its effect)."""

    kind: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True)
class Skip:
    """Record the step as skipped and go on with the next one."""

    kind: Literal["skip"] = "skip"


@dataclass(frozen=True, slots=True)
class Fail:
    """End the task as Failed."""

    kind: Literal["fail"] = "fail"


@dataclass(frozen=True, slots=True)
class Continue:
    """Go on: under the template as it is now, or from a workflow's recorded focus."""

    kind: Literal["continue"] = "continue"


@dataclass(frozen=True, slots=True)
class Rerun:
    """Run a workflow's interrupted step again from its beginning."""

    kind: Literal["rerun"] = "rerun"


@dataclass(frozen=True, slots=True)
class Investigate:
    """Hold the workflow so the owner can look first; asked again on resume."""

    kind: Literal["investigate"] = "investigate"


@dataclass(frozen=True, slots=True)
class Back:
    """Go back to the workflow step before the failed one, to fix it."""

    kind: Literal["back"] = "back"


@dataclass(frozen=True, slots=True)
class Abort:
    """Stop the workflow."""

    kind: Literal["abort"] = "abort"


@dataclass(frozen=True, slots=True)
class Resume:
    """Put a task parked by recovery back where it was."""

    kind: Literal["resume"] = "resume"


@dataclass(frozen=True, slots=True)
class Abandon:
    """End a task parked by recovery as Abandoned."""

    kind: Literal["abandon"] = "abandon"


@dataclass(frozen=True, slots=True)
class Always:
    """Yes, and from now on: a permission kept for later calls and later tasks."""

    kind: Literal["always"] = "always"


@dataclass(frozen=True, slots=True)
class Never:
    """No, and from now on: a refusal kept for later calls and later tasks."""

    kind: Literal["never"] = "never"


Answer = (
    Approve
    | Deny
    | Retry
    | Skip
    | Fail
    | Continue
    | Rerun
    | Investigate
    | Back
    | Abort
    | Resume
    | Abandon
    | Always
    | Never
)

_BY_KIND: dict[str, Answer] = {
    a.kind: a
    for a in (
        Approve(),
        Deny(),
        Retry(),
        Skip(),
        Fail(),
        Continue(),
        Rerun(),
        Investigate(),
        Back(),
        Abort(),
        Resume(),
        Abandon(),
        Always(),
        Never(),
    )
}
ANSWERS = tuple(_BY_KIND)


def parse_answer(text: object, field: str = "decision") -> Answer:
    """The answer the owner gave, or BadRequest naming `field` and every answer there is."""
    if text is None:
        raise BadRequest(field, "is required")
    if not isinstance(text, str):
        raise BadRequest(field, f"must be a string, not {type(text).__name__}")
    answer = _BY_KIND.get(text.strip().lower())
    if answer is None:
        raise BadRequest(field, f"{text!r} is not an answer; answers are {', '.join(ANSWERS)}")
    return answer


def answer_of(kind: str) -> Answer:
    """A stored answer (a question's option, a decision in the journal) as its record."""
    return parse_answer(kind)


def in_words(decision: str | None) -> str:
    """A decision as the owner is told it: "approved", "denied", "answered skip" (an
    approval's status alone reads a skip or a retry as a refusal: "denied (skip)")."""
    if decision is None:
        return "answered"
    return {"approve": "approved", "deny": "denied"}.get(decision, f"answered {decision}")
