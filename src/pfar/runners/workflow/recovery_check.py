"""The recovery check (seed 003): what a workflow does first when it finds its trace.md.

Pure functions of a parsed `Trace` and of the files under `base_dir` (the task spec and the
artifacts). The state comes from the workflow's status and its current step: the one in
progress, else the last one that has left `pending` (steps written ahead as `pending` are the
plan, not progress):

    state          workflow / current step        what happens
    completed      completed   / (any)            tell the owner; do not re-run
    between_steps  in-progress / completed        resume at the next step, no question
    mid_step       in-progress / in-progress      ask: continue, re-run or investigate
    failed         in-progress / failed           ask: retry, skip, go back or abort
    not_started    in-progress / none             start at the first step

A missing artifact is a discrepancy the owner must see: between steps it turns the automatic
resume into a question (continue anyway, or investigate first).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ..paths import exists_inside, resolved_inside
from .trace import Artifact, ResumeEntry, StepStatus, Trace, TraceStep, WorkflowStatus


class TraceState(StrEnum):
    not_started = "not_started"
    completed = "completed"
    between_steps = "between_steps"
    mid_step = "mid_step"
    failed = "failed"


class OwnerOption(StrEnum):
    """What the owner may choose when recovery needs them."""

    continue_ = "continue"  # pick up from the recorded current focus (or the next step)
    rerun = "rerun"  # run the interrupted step again from its beginning
    investigate = "investigate"  # look at the partial state first, then decide
    retry = "retry"  # run the failed step again
    skip = "skip"  # leave the failed step and go on with the next one
    back = "back"  # go back to the step before the failed one, to fix it
    abort = "abort"  # stop the workflow


@dataclass(frozen=True, slots=True)
class StepNote:
    step: int
    name: str
    text: str


@dataclass(frozen=True, slots=True)
class ArtifactCheck:
    step: int
    text: str
    path: str  # as written in the trace, relative to base_dir
    exists: bool
    # False: the path (or a symlink on it) leads outside base_dir; never counted as there
    inside: bool = True


@dataclass(frozen=True, slots=True)
class Context:
    """What a new session re-reads before it continues (seed 003, context reconstruction)."""

    task_spec: str
    task_spec_exists: bool
    key_decisions: tuple[StepNote, ...]  # of every started step, the interrupted one included
    artifacts: tuple[Artifact, ...]
    current_focus: str  # of the interrupted or failed step; "" otherwise


@dataclass(frozen=True, slots=True)
class RecoveryDecision:
    state: TraceState
    resume_step: int | None  # None: the workflow is completed, nothing resumes
    resume_name: str  # "" when neither the trace nor step_names knows it
    completed_steps: tuple[int, ...]
    message: str  # for the owner, in the seed's wording
    options: tuple[OwnerOption, ...]  # empty: nothing to choose
    needs_owner: bool
    context: Context
    artifacts: tuple[ArtifactCheck, ...]

    @property
    def missing(self) -> tuple[ArtifactCheck, ...]:
        return tuple(a for a in self.artifacts if not a.exists)


def current_step(trace: Trace) -> TraceStep | None:
    """The step recovery is about, the seed's "last step".

    The step in progress if there is one (going back to an earlier step leaves the later ones
    as they were), else the last step that has left `pending`.
    """
    running = [s for s in trace.steps if s.status is StepStatus.in_progress]
    started = running or [s for s in trace.steps if s.status is not StepStatus.pending]
    return started[-1] if started else None


def classify(trace: Trace) -> TraceState:
    """The seed's trace-states table; a completed workflow is completed whatever its steps say."""
    if trace.status is WorkflowStatus.completed:
        return TraceState.completed
    last = current_step(trace)
    if last is None:
        return TraceState.not_started
    return {
        StepStatus.completed: TraceState.between_steps,
        StepStatus.in_progress: TraceState.mid_step,
        StepStatus.failed: TraceState.failed,
    }[last.status]


def _exists(base: Path, path: str) -> bool:
    # inside `base` only: a hand-edited trace may name /etc/hostname, or a symlink lead out
    return exists_inside(base, path)


def reconstruct_context(trace: Trace, base_dir: str | os.PathLike[str]) -> Context:
    """What to re-read before continuing; paths are relative to `base_dir` (the task directory)."""
    started = [s for s in trace.steps if s.status is not StepStatus.pending]
    last = current_step(trace)
    focus = last.current_focus if last and last.status is not StepStatus.completed else ""
    return Context(
        task_spec=trace.task_spec,
        task_spec_exists=bool(trace.task_spec) and _exists(Path(base_dir), trace.task_spec),
        key_decisions=tuple(
            StepNote(s.number, s.name, s.key_decisions) for s in started if s.key_decisions
        ),
        artifacts=tuple(a for s in trace.steps for a in s.artifacts),
        current_focus=focus,
    )


def verify_artifacts(trace: Trace, base_dir: str | os.PathLike[str]) -> list[ArtifactCheck]:
    """One check per path the trace's artifacts name (the first mention of each)."""
    checks: dict[str, ArtifactCheck] = {}
    for step in trace.steps:
        for artifact in step.artifacts:
            path = artifact.path
            if path is not None and path not in checks:
                base = Path(base_dir)
                exists = _exists(base, path)
                inside = exists or resolved_inside(base, path) is not None
                checks[path] = ArtifactCheck(step.number, artifact.text, path, exists, inside)
    return list(checks.values())


def _ranges(numbers: Sequence[int]) -> str:
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _done(steps: Sequence[TraceStep]) -> str:
    """'Steps 1-2 completed (orient, design)'."""
    word = "Steps" if len(steps) > 1 else "Step"
    names = ", ".join(s.name for s in steps)
    return f"{word} {_ranges([s.number for s in steps])} completed ({names})"


def _step_ref(number: int, name: str) -> str:
    return f"Step {number} ({name})" if name else f"Step {number}"


_FOCUS_PARTS = re.compile(r"\s*\b(completed|remaining):\s*", re.IGNORECASE)


def _focus_lines(focus: str) -> tuple[str, list[str]]:
    """Split 'X. Completed: a. Remaining: b.' into the focus itself and one line per part."""
    head, *rest = _FOCUS_PARTS.split(focus.strip())
    lines = [f"Current focus: {head or '(none recorded)'}"]
    parts = zip(rest[::2], rest[1::2], strict=True)
    lines += [f"{label.capitalize()}: {text}" for label, text in parts]
    return head.rstrip("."), lines


_Choices = list[tuple[OwnerOption, str]]


def decide(
    trace: Trace, base_dir: str | os.PathLike[str], step_names: Sequence[str] = ()
) -> RecoveryDecision:
    """The recovery rule for this trace, and what to tell the owner.

    `step_names` is the workflow's plan; it names the next step when the trace has not
    written it ahead as a pending step.
    """

    def name_of(number: int) -> str:
        step = trace.step(number)
        if step is not None:
            return step.name
        return step_names[number - 1] if 0 < number <= len(step_names) else ""

    state = classify(trace)
    checks = tuple(verify_artifacts(trace, base_dir))
    completed = [s for s in trace.steps if s.status is StepStatus.completed]
    last = current_step(trace)
    choices: _Choices = []
    if state is TraceState.completed:
        which = f" {trace.workflow}" if trace.workflow else ""
        done = f" ({_done(completed)})" if completed else ""
        message = (
            # the trace says it completed, not when: maybe in this very session
            f"Workflow{which} completed{done}. "
            "Not re-running it; ask explicitly if it should run again."
        )
        resume = None
    elif last is None or last.status is StepStatus.completed:
        resume = 1 if last is None else last.number + 1  # steps after the last started are pending
        name = name_of(resume)
        start = f"Step {resume}: {name}" if name else f"Step {resume}"
        if last is None:
            message = f"No step has started yet. Starting from {start}."
        else:
            message = f"{_done(completed)}. Resuming from {start}."
        if any(not c.exists for c in checks):  # a discrepancy: the owner decides
            choices = [
                (OwnerOption.continue_, f"Continue with {_step_ref(resume, name)} anyway"),
                (OwnerOption.investigate, "Investigate first"),
            ]
    elif state is TraceState.mid_step:
        message, choices = _interrupted(last, checks)
        resume = last.number
    else:
        message, choices = _failed(last, name_of)
        resume = last.number
    missing = [c.path for c in checks if not c.exists]
    if missing:
        message += f"\nArtifacts missing: {', '.join(missing)} (listed in the trace, not found)"
    if choices:
        lines = (f"{i}. {text}" for i, (_, text) in enumerate(choices, start=1))
        message += "\n\nHow would you like to proceed?\n" + "\n".join(lines)
    return RecoveryDecision(
        state=state,
        resume_step=resume,
        resume_name="" if resume is None else name_of(resume),
        completed_steps=tuple(s.number for s in completed),
        message=message,
        options=tuple(option for option, _ in choices),
        needs_owner=bool(choices),
        context=reconstruct_context(trace, base_dir),
        artifacts=checks,
    )


def _interrupted(last: TraceStep, checks: Sequence[ArtifactCheck]) -> tuple[str, _Choices]:
    head, focus = _focus_lines(last.current_focus)
    lines = [f"Step {last.number} ({last.name}) was interrupted."]
    lines += [f"Summary: {last.summary}"] if last.summary else []
    lines += focus
    present = [c.path for c in checks if c.exists]
    lines += [f"Artifacts verified: {', '.join(present)}"] if present else []
    again = f"Continue from {head[:1].lower() + head[1:]}" if head else "Continue"
    choices = [
        (OwnerOption.continue_, again),
        (OwnerOption.rerun, f"Re-run Step {last.number} from beginning"),
        (OwnerOption.investigate, "Investigate current state first"),
    ]
    return "\n".join(lines), choices


def _failed(last: TraceStep, name_of: Callable[[int], str]) -> tuple[str, _Choices]:
    n = last.number
    lines = [f"Step {n} ({last.name}) failed in prior session."]
    lines += [f"Summary: {last.summary}"] if last.summary else []
    lines += [f"Challenges: {last.challenges}"] if last.challenges else []
    lines += [f"Failed at: {last.current_focus}"] if last.current_focus else []
    skip = f"Skip Step {n}"
    skip += f" and continue with {_step_ref(n + 1, name_of(n + 1))}" if name_of(n + 1) else ""
    choices = [(OwnerOption.retry, f"Retry Step {n}"), (OwnerOption.skip, skip)]
    if n > 1:
        choices.append((OwnerOption.back, f"Go back to {_step_ref(n - 1, name_of(n - 1))} to fix"))
    choices.append((OwnerOption.abort, "Abort workflow"))
    return "\n".join(lines), choices


def resume_entry(decision: RecoveryDecision, when: str, session: str) -> ResumeEntry:
    """The `## Resume` entry that records this session boundary in the trace.

    Raises:
        ValueError: the workflow is completed; nothing resumes.
    """
    if decision.resume_step is None:
        raise ValueError("a completed workflow is not resumed, so it gets no resume entry")
    ctx = decision.context
    parts = []
    if ctx.task_spec:
        parts.append(ctx.task_spec + ("" if ctx.task_spec_exists else " (missing)"))
    if ctx.key_decisions:
        numbers = [n.step for n in ctx.key_decisions]
        word = "Steps" if len(numbers) > 1 else "Step"
        parts.append(f"key decisions of {word} {_ranges(numbers)}")
    if decision.artifacts:
        present = len(decision.artifacts) - len(decision.missing)
        parts.append(f"artifacts ({present} of {len(decision.artifacts)} present)")
    return ResumeEntry(
        step=decision.resume_step,
        step_name=decision.resume_name,
        prior_completed=len(decision.completed_steps),
        resumed=f"{when} — session {session}" if session else when,
        context_from=", ".join(parts),
    )
