"""A loop task as a kernel task: its journal row and settings, checked at the edge."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import BadRequest
from ...journal import InboundEvent, TaskKind, TaskRecord
from ...journal.payloads import Executing
from ...journal.turns import LoopSettings

LOOP_TEMPLATE = "loop"
TIERS = ("cheap", "worker", "planner")
MAX_PROMPT = 1 << 20


@dataclass(frozen=True, slots=True)
class LoopRequest:
    """What the owner asks a loop task to do, and how."""

    prompt: str
    directory: str
    tier: str = "worker"
    once: bool = False
    title: str = ""
    worktree: bool = False  # work in a git worktree of the directory's repository
    # when tasks wait for a slot ([scheduler] max_concurrent), higher goes first
    priority: int = 0


def checked(request: LoopRequest) -> LoopRequest:
    """The request with its directory made absolute; BadRequest names a bad field."""
    if not request.prompt.strip():
        raise BadRequest("prompt", "is empty: say what the task is to do")
    if len(request.prompt) > MAX_PROMPT:
        raise BadRequest("prompt", f"is over {MAX_PROMPT:,} characters")
    if request.tier not in TIERS:
        raise BadRequest("tier", f"{request.tier!r} is not a tier; tiers are {', '.join(TIERS)}")
    directory = Path(os.path.abspath(os.path.expanduser(request.directory)))
    if not directory.is_dir():
        raise BadRequest("directory", f"{directory} is not a directory")
    if not -100 <= request.priority <= 100:
        raise BadRequest("priority", f"{request.priority} is not between -100 and 100")
    title = request.title.strip() or " ".join(request.prompt.split())[:60]
    return dataclasses.replace(request, directory=str(directory), title=title)


def loop_task(
    request: LoopRequest, prompt: str, event: InboundEvent
) -> tuple[TaskRecord, LoopSettings]:
    """A new loop task for a checked request (`prompt` as it is stored: redacted)."""
    task = TaskRecord.new(
        TaskKind.loop,
        LOOP_TEMPLATE,
        event,
        Executing(),
        data_ceiling="internal",
        output_sinks=["owner"],
        template_hash="",
        execute_progress={"current_step": 0},
        extracted_metadata={"directory": request.directory, "title": request.title},
    )
    settings = LoopSettings(
        working_dir=request.directory,
        tier=request.tier,
        once=request.once,
        title=request.title,
        use_worktree=request.worktree,
        priority=request.priority,
    )
    return task, settings
