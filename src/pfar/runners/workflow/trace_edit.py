"""Editing and storing `trace.md`: step helpers, and atomic reads and writes.

A trace that cannot be read is never rewritten: every helper that writes reads
(and checks) first, and refuses to replace what it could not parse.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .trace import (
    Artifact,
    ResumeEntry,
    StepMismatch,
    StepStatus,
    Trace,
    TraceFormatError,
    TraceStep,
    WorkflowStatus,
    render_trace,
)
from .trace_parse import parse_trace


def new_trace(
    workflow: str, task_spec: str, step_names: Sequence[str], *, started: str = ""
) -> Trace:
    """A fresh trace with every step written ahead as `pending`."""
    names = [_one_line(name) for name in step_names]
    return Trace(
        status=WorkflowStatus.in_progress,
        task_spec=_clean(task_spec),
        workflow=_clean(workflow),
        title=_one_line(f"Trace: {workflow}"),
        started=_clean(started),
        sections=tuple(TraceStep(n, name) for n, name in enumerate(names, start=1)),
    )


def update_step(
    trace: Trace,
    number: int,
    name: str | None = None,
    *,
    status: StepStatus | None = None,
    summary: str | None = None,
    artifacts: Sequence[str] | None = None,
    key_decisions: str | None = None,
    current_focus: str | None = None,
    challenges: str | None = None,
) -> Trace:
    """The trace with step `number` changed; a field given as None keeps its value.

    Text is stored as the file will read it back: CR/CRLF become LF, line ends and outer
    blank lines are dropped; an artifact is one line.

    Raises:
        StepMismatch: the trace has no such step, or `name` is not its name.
    """
    texts = {
        "summary": summary,
        "key_decisions": key_decisions,
        "current_focus": current_focus,
        "challenges": challenges,
    }
    changes: dict[str, Any] = {k: _clean(v) for k, v in texts.items() if v is not None}
    if status is not None:
        changes["status"] = status
    if artifacts is not None:
        changes["artifacts"] = tuple(Artifact(_one_line(a)) for a in artifacts if _one_line(a))
    sections = list(trace.sections)
    for i, s in enumerate(sections):
        if isinstance(s, TraceStep) and s.number == number:
            if name is not None and s.name != _one_line(name):
                raise StepMismatch(f"Step {number} of the trace is {s.name!r}, not {name!r}")
            sections[i] = replace(s, **changes)
            return replace(trace, sections=tuple(sections))
    have = f"Steps 1-{len(trace.steps)}" if trace.steps else "no steps"
    raise StepMismatch(f"the trace has no Step {number}; it has {have}")


def _clean(text: str) -> str:
    lines = [x.rstrip() for x in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(lines).strip("\n").lstrip()


def _one_line(text: str) -> str:
    return " ".join(_clean(text).split("\n"))


def start_step(trace: Trace, number: int, name: str, *, current_focus: str = "") -> Trace:
    """Mark step `number` in-progress with this focus (adding it if it is the next step).

    The workflow goes back to in-progress too.
    """
    trace = replace(trace, status=WorkflowStatus.in_progress)
    if trace.step(number) is None and number == len(trace.steps) + 1:
        trace = replace(trace, sections=(*trace.sections, TraceStep(number, _one_line(name))))
    return update_step(
        trace, number, name, status=StepStatus.in_progress, current_focus=current_focus
    )


def complete_step(
    trace: Trace,
    number: int,
    *,
    summary: str | None = None,
    artifacts: Sequence[str] | None = None,
    key_decisions: str | None = None,
) -> Trace:
    done = StepStatus.completed
    return update_step(
        trace,
        number,
        status=done,
        summary=summary,
        artifacts=artifacts,
        key_decisions=key_decisions,
    )


def fail_step(
    trace: Trace,
    number: int,
    *,
    summary: str | None = None,
    challenges: str | None = None,
    current_focus: str | None = None,
    artifacts: Sequence[str] | None = None,
) -> Trace:
    return update_step(
        trace,
        number,
        status=StepStatus.failed,
        summary=summary,
        artifacts=artifacts,
        current_focus=current_focus,
        challenges=challenges,
    )


def complete_workflow(trace: Trace) -> Trace:
    return replace(trace, status=WorkflowStatus.completed)


def append_resume(trace: Trace, entry: ResumeEntry) -> Trace:
    return replace(trace, sections=(*trace.sections, entry))


# The file.


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and parse a trace file.

    Raises:
        FileNotFoundError: there is no trace (the workflow starts fresh).
        TraceFormatError: the file is not UTF-8 or not a trace.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        got = repr(data[exc.start : exc.end])
        raise TraceFormatError(str(path), line, "UTF-8 text", got) from exc
    return parse_trace(text, str(path))


def write_trace_atomic(path: str | os.PathLike[str], trace: Trace) -> None:
    """Replace the trace file with `trace`: all of it or, after a crash, none of it.

    A temp file in the same directory is written and fsynced, renamed over the trace, and
    the directory fsynced. An existing file that does not parse is never replaced: people
    edit traces, and their edit is worth more than ours. They move it aside to start over.

    Raises:
        TraceFormatError: the existing file cannot be read, or `trace` holds a value that
            would not read back unchanged (a step numbered out of order, ...).
    """
    target = Path(path)
    text = render_trace(trace)
    if parse_trace(text, f"{target} (as rendered)") != trace:
        raise TraceFormatError(str(target), 0, "a trace that reads back as written")
    mode = 0o644
    if target.exists():
        read_trace(target)
        mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def update_trace(path: str | os.PathLike[str], change: Callable[[Trace], Trace]) -> Trace:
    """Read the trace, apply `change`, write the result back.

    If reading or `change` fails, nothing is written.
    """
    trace = change(read_trace(path))
    write_trace_atomic(path, trace)
    return trace
