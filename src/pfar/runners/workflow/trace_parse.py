"""Reading `trace.md` (the format is trace.py's): tolerant of what people do to the file,
exact about what it cannot read.

Blank lines, field order and the case of field names do not matter, a value may run over
several lines (until the next field or section), and unknown `## ` sections and
`**Field:**` lines are kept where they were. What it cannot read it refuses with a
`TraceFormatError` naming the line and what it expected; it never guesses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from .trace import (
    BULLET,
    FIELD,
    H1,
    H2,
    HEADER_FIELDS,
    RESUME_FIELDS,
    SEPARATOR,
    STEP_FIELDS,
    Artifact,
    ExtraField,
    RawSection,
    ResumeEntry,
    Section,
    StepStatus,
    Trace,
    TraceFormatError,
    TraceStep,
    WorkflowStatus,
)

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
        if (m := H2.match(line)) is not None:
            heading = (m.group(1) or "").strip()
            block, current = _Block(number, heading, _kind(heading)), None
            blocks.append(block)
        elif block.kind == "raw":
            block.raw.append(line)
        elif block is header and (m := H1.match(line)) is not None:
            if title is not None or header.fields:
                raise TraceFormatError(source, number, "one '# ' title, above the fields", line)
            title = (m.group(1) or "").strip()
        elif SEPARATOR.match(line):
            continue
        elif (m := FIELD.match(line)) is not None:
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
        if f.key in STEP_FIELDS and f.key not in HEADER_FIELDS:
            raise TraceFormatError(source, f.line, "a '## Step N: <name>' heading above it", f.text)
    known, extra = _split(block, HEADER_FIELDS, "the header", source)
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
        while body and (not body[-1].strip() or SEPARATOR.match(body[-1])):
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
    known, extra = _split(block, STEP_FIELDS, f"Step {number}", source)
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
    known, extra = _split(block, RESUME_FIELDS, "## Resume", source)
    for key, what in (("resuming from", "Step N — <name>"), ("prior steps completed", "a count")):
        if key not in known:
            expected = f"a **{RESUME_FIELDS[key]}:** field ({what}) in ## Resume"
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
        m = BULLET.match(line)
        items.extend([m.group(1)] if m else line.split(","))
    return tuple(Artifact(t.strip()) for t in items if t.strip())
