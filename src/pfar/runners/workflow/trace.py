"""The workflow trace, `trace.md`: what a workflow has done, step by step (seed 003, tracking).

People read and edit the file, so the reader is tolerant: blank lines, field order and the
case of field names do not matter, a value may run over several lines (until the next field
or section), and unknown `## ` sections and `**Field:**` lines are kept and written back where
they were. What it cannot read it refuses, naming the line and what it expected; it never
guesses, and a trace that cannot be read is never rewritten (`write_trace_atomic` checks).

`render_trace` writes the canonical form::

    # Trace: auth_feature

    **Task spec:** tasks/auth_feature/tracking.md
    **Workflow:** auth_feature
    **Status:** in-progress

    ---

    ## Step 1: orient
    **Status:** completed
    **Summary:** Read the spec.
    **Artifacts:** Created src/auth/login.py, modified src/api/routes.py

    ---

    ## Resume

    **Resumed:** 2030-01-02T03:04:05Z — session s2
    **Resuming from:** Step 2 — design
    **Prior steps completed:** 1

Empty optional fields are left out. A value line that would read as a heading, a field or a
`---` separator, or that starts with a backslash, gets a leading backslash (markdown's own
escape), so every value survives the round trip `parse_trace(render_trace(t)) == t`.

This module holds the trace as records, the format's known fields and line shapes, and
the canonical writer; the tolerant reader is trace_parse.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

from ...errors import PfarError


class TraceFormatError(PfarError):
    """A trace.md that cannot be read: the file, the line and what was expected there."""

    code = "trace_format"

    def __init__(self, source: str, line: int, expected: str, got: str | None = None) -> None:
        where = f"{source}:{line}" if line else source
        tail = "" if got is None else f"; got {got!r}"
        super().__init__(f"{where}: expected {expected}{tail}")
        self.source, self.line, self.expected, self.got = source, line, expected, got


class StepMismatch(PfarError):
    """A helper was asked to change a step the trace does not have, or has under another name."""

    code = "step_mismatch"


class StepStatus(StrEnum):
    pending = "pending"
    in_progress = "in-progress"
    completed = "completed"
    failed = "failed"


class WorkflowStatus(StrEnum):
    in_progress = "in-progress"
    completed = "completed"


@dataclass(frozen=True, slots=True)
class ExtraField:
    """A field pfar does not know, kept as written.

    `name` is "" for free text above a section's first field. `after` is the canonical key
    of the known field it followed ("task spec", "summary", ...; "" for the top), which is
    where it is written back.
    """

    name: str
    value: str
    after: str = ""


_PATHISH = re.compile(r"/|\.[A-Za-z][A-Za-z0-9]{0,9}$")


@dataclass(frozen=True, slots=True)
class Artifact:
    """One artifact as written ("Created src/auth/login.py"); `path` is the file it names."""

    text: str

    @property
    def path(self) -> str | None:
        """The last token that looks like a path (has a '/' or an extension), or None."""
        for token in reversed(self.text.split()):
            token = token.lstrip("`'\"([<{").rstrip("`'\")]>},;:!?.")
            if token and "://" not in token and _PATHISH.search(token):
                return token
        return None


@dataclass(frozen=True, slots=True)
class TraceStep:
    number: int
    name: str
    status: StepStatus = StepStatus.pending
    summary: str = ""
    artifacts: tuple[Artifact, ...] = ()
    key_decisions: str = ""
    current_focus: str = ""
    challenges: str = ""
    extra: tuple[ExtraField, ...] = ()


@dataclass(frozen=True, slots=True)
class ResumeEntry:
    """A `## Resume` section: where a later session picked the workflow up."""

    step: int
    step_name: str
    prior_completed: int
    resumed: str = ""
    context_from: str = ""
    extra: tuple[ExtraField, ...] = ()


@dataclass(frozen=True, slots=True)
class RawSection:
    """An unknown `## ` section, kept verbatim (without its surrounding blank lines and `---`)."""

    heading: str
    body: str


Section: TypeAlias = TraceStep | ResumeEntry | RawSection


@dataclass(frozen=True, slots=True)
class Trace:
    """A whole trace: header fields, then its sections in file order."""

    status: WorkflowStatus
    task_spec: str = ""
    workflow: str = ""
    title: str = ""
    started: str = ""
    extra: tuple[ExtraField, ...] = ()
    sections: tuple[Section, ...] = field(default=())

    @property
    def steps(self) -> tuple[TraceStep, ...]:
        return tuple(s for s in self.sections if isinstance(s, TraceStep))

    @property
    def resumes(self) -> tuple[ResumeEntry, ...]:
        return tuple(s for s in self.sections if isinstance(s, ResumeEntry))

    def step(self, number: int) -> TraceStep | None:
        return next((s for s in self.steps if s.number == number), None)


# Known fields per section, canonical key -> label, in the order they are written.
HEADER_FIELDS = {
    "task spec": "Task spec",
    "workflow": "Workflow",
    "status": "Status",
    "started": "Started",
}
STEP_FIELDS = {
    "status": "Status",
    "summary": "Summary",
    "artifacts": "Artifacts",
    "key decisions": "Key decisions",
    "current focus": "Current focus",
    "challenges": "Challenges",
}
RESUME_FIELDS = {
    "resumed": "Resumed",
    "resuming from": "Resuming from",
    "prior steps completed": "Prior steps completed",
    "context reconstructed from": "Context reconstructed from",
}

H1 = re.compile(r"#(?:[ \t]+(.*))?$")
H2 = re.compile(r"##(?:[ \t]+(.*))?$")
FIELD = re.compile(r"\s*\*\*\s*([^*:\s][^*:]*?)\s*(?::\*\*|\*\*\s*:)(.*)$")
SEPARATOR = re.compile(r"\s*-{3,}\s*$")
BULLET = re.compile(r"\s*[-*+][ \t]+(.*)$")


def render_trace(trace: Trace) -> str:
    """The canonical text of a trace; `parse_trace` reads it back equal."""
    out = [f"# {trace.title}", ""] if trace.title else []
    header = {
        "task spec": trace.task_spec,
        "workflow": trace.workflow,
        "status": str(trace.status),
        "started": trace.started,
    }
    out += _fields(HEADER_FIELDS, header, trace.extra)
    for s in trace.sections:
        out += ["", "---", ""]
        if isinstance(s, TraceStep):
            out.append(f"## Step {s.number}: {s.name}")
            values: dict[str, str | tuple[Artifact, ...]] = {
                "status": str(s.status),
                "summary": s.summary,
                "artifacts": s.artifacts,
                "key decisions": s.key_decisions,
                "current focus": s.current_focus,
                "challenges": s.challenges,
            }
            out += _fields(STEP_FIELDS, values, s.extra)
        elif isinstance(s, ResumeEntry):
            start = f"Step {s.step} — {s.step_name}" if s.step_name else f"Step {s.step}"
            resume = {
                "resumed": s.resumed,
                "resuming from": start,
                "prior steps completed": str(s.prior_completed),
                "context reconstructed from": s.context_from,
            }
            out += ["## Resume", "", *_fields(RESUME_FIELDS, resume, s.extra)]
        else:
            out.append(f"## {s.heading}".rstrip())
            out += ["", s.body] if s.body else []
    return "\n".join(out) + "\n"


_REQUIRED = frozenset({"status", "resuming from", "prior steps completed"})


def _fields(
    labels: Mapping[str, str],
    values: Mapping[str, str | tuple[Artifact, ...]],
    extra: tuple[ExtraField, ...],
) -> list[str]:
    out = [line for e in extra if e.after == "" for line in _extra(e)]
    for key, label in labels.items():
        anchored = [e for e in extra if e.after == key]
        value = values[key]
        if value or key in _REQUIRED or anchored:
            if isinstance(value, tuple):
                out += _artifact_lines(value)
            else:
                out += _value_lines(label, value)
        out += [line for e in anchored for line in _extra(e)]
    # an anchor this section does not have (built by hand): keep the field, at the end
    return out + [line for e in extra if e.after and e.after not in labels for line in _extra(e)]


def _escape(line: str) -> str:
    special = line.startswith("\\") or any(r.match(line) for r in (H1, H2, FIELD, SEPARATOR))
    return "\\" + line if special else line


def _value_lines(label: str, value: str) -> list[str]:
    first, *rest = value.split("\n")
    return [f"**{label}:** {first}".rstrip(), *map(_escape, rest)]


def _extra(e: ExtraField) -> list[str]:
    return _value_lines(e.name, e.value) if e.name else [_escape(x) for x in e.value.split("\n")]


def _artifact_lines(artifacts: tuple[Artifact, ...]) -> list[str]:
    texts = [a.text for a in artifacts]
    if any("," in t for t in texts) or (texts and BULLET.match(texts[0])):
        return ["**Artifacts:**", *(f"- {t}" for t in texts)]
    return [f"**Artifacts:** {', '.join(texts)}".rstrip()]
