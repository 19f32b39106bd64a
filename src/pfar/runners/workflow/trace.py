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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TypeAlias, TypeVar

from ...errors import PfarError


class TraceFormatError(PfarError):
    """A trace.md that cannot be read: the file, the line and what was expected there."""

    def __init__(self, source: str, line: int, expected: str, got: str | None = None) -> None:
        where = f"{source}:{line}" if line else source
        tail = "" if got is None else f"; got {got!r}"
        super().__init__(f"{where}: expected {expected}{tail}")
        self.source, self.line, self.expected, self.got = source, line, expected, got


class StepMismatch(PfarError):
    """A helper was asked to change a step the trace does not have, or has under another name."""


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
_HEADER = {
    "task spec": "Task spec",
    "workflow": "Workflow",
    "status": "Status",
    "started": "Started",
}
_STEP = {
    "status": "Status",
    "summary": "Summary",
    "artifacts": "Artifacts",
    "key decisions": "Key decisions",
    "current focus": "Current focus",
    "challenges": "Challenges",
}
_RESUME = {
    "resumed": "Resumed",
    "resuming from": "Resuming from",
    "prior steps completed": "Prior steps completed",
    "context reconstructed from": "Context reconstructed from",
}

_H1 = re.compile(r"#(?:[ \t]+(.*))?$")
_H2 = re.compile(r"##(?:[ \t]+(.*))?$")
_FIELD = re.compile(r"\s*\*\*\s*([^*:\s][^*:]*?)\s*(?::\*\*|\*\*\s*:)(.*)$")
_SEPARATOR = re.compile(r"\s*-{3,}\s*$")
_BULLET = re.compile(r"\s*[-*+][ \t]+(.*)$")
_STEP_WORD = re.compile(r"step(?=[\s\d:]|$)", re.IGNORECASE)
_STEP_HEADING = re.compile(r"step[ \t]*([0-9]+)[ \t]*[:.—–-](.*)$", re.IGNORECASE)
_RESUMING = re.compile(r"step[ \t]*([0-9]+)(?:[ \t]*[:.—–-](.*))?$", re.IGNORECASE)


@dataclass
class _Field:
    name: str
    line: int
    text: str
    lines: list[str]

    @property
    def key(self) -> str:
        return " ".join(self.name.split()).casefold()

    @property
    def value(self) -> str:
        return "\n".join(self.lines).strip("\n")


@dataclass
class _Block:
    line: int
    heading: str
    kind: str  # header | step | resume | raw
    fields: list[_Field] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)


def _kind(heading: str) -> str:
    if _STEP_WORD.match(heading):
        return "step"
    return "resume" if heading.casefold() == "resume" else "raw"


def parse_trace(text: str, source: str) -> Trace:
    """Read a trace.md; `source` names it in errors.

    Raises:
        TraceFormatError: naming the line and what was expected there.
    """
    header = _Block(1, "", "header")
    blocks: list[_Block] = []
    block, current, title = header, None, None
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        if (m := _H2.match(line)) is not None:
            heading = (m.group(1) or "").strip()
            block, current = _Block(number, heading, _kind(heading)), None
            blocks.append(block)
        elif block.kind == "raw":
            block.raw.append(line)
        elif block is header and (m := _H1.match(line)) is not None:
            if title is not None or header.fields:
                raise TraceFormatError(source, number, "one '# ' title, above the fields", line)
            title = (m.group(1) or "").strip()
        elif _SEPARATOR.match(line):
            continue
        elif (m := _FIELD.match(line)) is not None:
            current = _Field(m.group(1), number, line, [m.group(2).strip()])
            block.fields.append(current)
        elif current is not None:
            current.lines.append(_unescape(line.rstrip()))
        elif line.strip():
            current = _Field("", number, line, [_unescape(line.rstrip())])
            block.fields.append(current)
    end = blocks[0].line if blocks else len(lines)
    trace = _header(header, title or "", end, source)
    sections: list[Section] = []
    for b in blocks:
        sections.append(_section(b, 1 + sum(isinstance(s, TraceStep) for s in sections), source))
    return replace(trace, sections=tuple(sections))


def _unescape(line: str) -> str:
    return line[1:] if line.startswith("\\") else line


def _split(
    block: _Block, labels: Mapping[str, str], where: str, source: str
) -> tuple[dict[str, _Field], tuple[ExtraField, ...]]:
    known: dict[str, _Field] = {}
    extra: list[ExtraField] = []
    last = ""
    for f in block.fields:
        if f.key not in labels:
            extra.append(ExtraField(f.name, f.value, last))
            continue
        if f.key in known:
            raise TraceFormatError(source, f.line, f"one **{labels[f.key]}:** in {where}", f.text)
        known[f.key], last = f, f.key
    return known, tuple(extra)


_E = TypeVar("_E", StepStatus, WorkflowStatus)


def _enum(kind: type[_E], f: _Field, source: str) -> _E:
    norm = re.sub(r"[\s_]+", "-", f.value.strip("`* \t").casefold())
    try:
        return kind(norm)
    except ValueError:
        names = ", ".join(kind)
        raise TraceFormatError(
            source, f.line, f"**Status:** to be one of {names}", f.value
        ) from None


def _header(block: _Block, title: str, end: int, source: str) -> Trace:
    for f in block.fields:
        if f.key in _STEP and f.key not in _HEADER:
            raise TraceFormatError(source, f.line, "a '## Step N: <name>' heading above it", f.text)
    known, extra = _split(block, _HEADER, "the header", source)
    if "status" not in known:
        expected = "a **Status:** field (in-progress or completed) in the header"
        raise TraceFormatError(source, end, expected)
    values = {k: f.value for k, f in known.items()}
    return Trace(
        status=_enum(WorkflowStatus, known["status"], source),
        task_spec=values.get("task spec", ""),
        workflow=values.get("workflow", ""),
        title=title,
        started=values.get("started", ""),
        extra=extra,
    )


def _section(block: _Block, expected: int, source: str) -> Section:
    if block.kind == "raw":
        body = block.raw
        while body and not body[0].strip():
            body = body[1:]
        while body and (not body[-1].strip() or _SEPARATOR.match(body[-1])):
            body = body[:-1]
        return RawSection(block.heading, "\n".join(body))
    if block.kind == "resume":
        return _resume(block, source)
    heading = f"## {block.heading}"
    m = _STEP_HEADING.match(block.heading)
    if m is None or not m.group(2).strip():
        raise TraceFormatError(source, block.line, "'## Step N: <name>' (N a number)", heading)
    number, name = int(m.group(1)), m.group(2).strip()
    if number != expected:
        what = f"'## Step {expected}: <name>' (steps are numbered 1, 2, 3… in order)"
        raise TraceFormatError(source, block.line, what, heading)
    known, extra = _split(block, _STEP, f"Step {number}", source)
    if "status" not in known:
        raise TraceFormatError(source, block.line, f"a **Status:** field in Step {number}")
    values = {k: f.value for k, f in known.items()}
    return TraceStep(
        number=number,
        name=name,
        status=_enum(StepStatus, known["status"], source),
        summary=values.get("summary", ""),
        artifacts=_artifacts(values.get("artifacts", "")),
        key_decisions=values.get("key decisions", ""),
        current_focus=values.get("current focus", ""),
        challenges=values.get("challenges", ""),
        extra=extra,
    )


def _resume(block: _Block, source: str) -> ResumeEntry:
    known, extra = _split(block, _RESUME, "## Resume", source)
    for key, what in (("resuming from", "Step N — <name>"), ("prior steps completed", "a count")):
        if key not in known:
            expected = f"a **{_RESUME[key]}:** field ({what}) in ## Resume"
            raise TraceFormatError(source, block.line, expected)
    start, prior = known["resuming from"], known["prior steps completed"]
    m = _RESUMING.match(start.value)
    if m is None:
        expected = "**Resuming from:** to read 'Step N — <name>'"
        raise TraceFormatError(source, start.line, expected, start.value)
    if re.fullmatch(r"[0-9]+", prior.value) is None:
        expected = "**Prior steps completed:** to be a whole number"
        raise TraceFormatError(source, prior.line, expected, prior.value)
    return ResumeEntry(
        step=int(m.group(1)),
        step_name=(m.group(2) or "").strip(),
        prior_completed=int(prior.value),
        resumed=known["resumed"].value if "resumed" in known else "",
        context_from=(
            known["context reconstructed from"].value
            if "context reconstructed from" in known
            else ""
        ),
        extra=extra,
    )


def _artifacts(value: str) -> tuple[Artifact, ...]:
    """A comma-separated list, a bullet list, or both: one bullet is one artifact."""
    items: list[str] = []
    for line in value.split("\n"):
        m = _BULLET.match(line)
        items.extend([m.group(1)] if m else line.split(","))
    return tuple(Artifact(t.strip()) for t in items if t.strip())


def render_trace(trace: Trace) -> str:
    """The canonical text of a trace; `parse_trace` reads it back equal."""
    out = [f"# {trace.title}", ""] if trace.title else []
    header = {
        "task spec": trace.task_spec,
        "workflow": trace.workflow,
        "status": str(trace.status),
        "started": trace.started,
    }
    out += _fields(_HEADER, header, trace.extra)
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
            out += _fields(_STEP, values, s.extra)
        elif isinstance(s, ResumeEntry):
            start = f"Step {s.step} — {s.step_name}" if s.step_name else f"Step {s.step}"
            resume = {
                "resumed": s.resumed,
                "resuming from": start,
                "prior steps completed": str(s.prior_completed),
                "context reconstructed from": s.context_from,
            }
            out += ["## Resume", "", *_fields(_RESUME, resume, s.extra)]
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
    special = line.startswith("\\") or any(r.match(line) for r in (_H1, _H2, _FIELD, _SEPARATOR))
    return "\\" + line if special else line


def _value_lines(label: str, value: str) -> list[str]:
    first, *rest = value.split("\n")
    return [f"**{label}:** {first}".rstrip(), *map(_escape, rest)]


def _extra(e: ExtraField) -> list[str]:
    return _value_lines(e.name, e.value) if e.name else [_escape(x) for x in e.value.split("\n")]


def _artifact_lines(artifacts: tuple[Artifact, ...]) -> list[str]:
    texts = [a.text for a in artifacts]
    if any("," in t for t in texts) or (texts and _BULLET.match(texts[0])):
        return ["**Artifacts:**", *(f"- {t}" for t in texts)]
    return [f"**Artifacts:** {', '.join(texts)}".rstrip()]


# Changing a trace: each helper returns a new Trace.
