"""Intake: work coming in. An event becomes a task (a template's, a loop's, a traced
workflow's), created with its place decided (a slot, or the queue) and started.

An event id is the adapter's message id: the same event twice makes one task, and
the id reused for anything else is refused, naming the task that has it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..answers import IN_PROCESS, Actor
from ..errors import BadRequest, ConfigError, EventIdReused, PfarError, ShuttingDown
from ..journal import InboundEvent, OwnerMessage, TaskKind, TaskRecord, TaskState
from ..journal.message_keys import MessageKind, RedactedInputKey, SkillsSkippedKey
from ..journal.payloads import Extracting
from ..journal.store import Store
from ..policy.redact import Redactor
from ..runners import TemplateRegistry
from ..runners.loop import tasks as loops
from ..runners.loop.tasks import LoopRequest
from ..runners.workflow.definition import load_definition
from ..tools import skills
from ..tools.skills import Skipped
from ..vault.home import Home
from .admission import Admission
from .audit import AuditLog
from .holds import HoldResult
from .learning import Learner
from .owner import OwnerChannel
from .workflows import workflow_task

log = logging.getLogger("pfar.skills")

# an event id is an adapter's message id: a uuid, a mail Message-ID; longer is not an id
MAX_EVENT_ID = 256


class IntakeHost(Protocol):
    """What intake uses of the kernel."""

    home: Home
    journal: Store
    templates: TemplateRegistry
    redactor: Redactor
    audit: AuditLog
    owner: OwnerChannel
    admission: Admission
    learner: Learner

    @property
    def accepting(self) -> bool: ...

    def title(self, task: TaskRecord) -> str: ...

    def advance(self, task_id: str, *, created: TaskRecord | None = None) -> None: ...

    async def resume_task(self, task_id: str, by: Actor = ...) -> HoldResult: ...


class Intake:
    def __init__(self, host: IntakeHost) -> None:
        self._k = host

    async def submit(
        self,
        template_id: str,
        text: str,
        *,
        event_id: str | None = None,
        adapter: str = "api",
        principal: str = "owner",
    ) -> TaskRecord:
        """Create a task from an event and start it. The same event id twice: one task."""
        k = self._k
        if not k.accepting:
            raise ShuttingDown()
        if not text.strip():  # refused as a loop's empty prompt is: a task about nothing
            raise BadRequest("text", "is empty: say what the task is about")
        if event_id is not None:
            check_event_id(event_id)
        tpl = self._reload_template(template_id)
        event = InboundEvent(
            event_id=event_id or str(uuid.uuid4()),
            adapter=adapter,
            template_id=template_id,
            text=k.redactor.text(text),
            principal=principal,
        )
        task = TaskRecord.new(
            TaskKind.pipeline,
            tpl.id,
            event,
            Extracting(),
            data_ceiling=tpl.data_ceiling,
            output_sinks=list(tpl.output_sinks),
            template_hash=tpl.content_hash,
        )
        stored, created = await self._create_entered(
            task, tpl.priority, lambda row: k.journal.tasks.create(row, event)
        )
        if not created:
            self._same_event(stored, event)
        if created:
            k.audit.log("task_created", task_id=stored.task_id, template_id=tpl.id, adapter=adapter)
            if found := k.redactor.found(text):
                await self._tell_text_was_redacted(stored, found)
            k.advance(stored.task_id, created=stored)
        return stored

    async def start_loop(
        self, request: LoopRequest, *, event_id: str | None = None, adapter: str = "api"
    ) -> TaskRecord:
        """Start an agentic loop task (seed 001) on `request`. The same event id twice:
        one task."""
        k = self._k
        if not k.accepting:
            raise ShuttingDown()
        if event_id is not None:
            check_event_id(event_id)
        request = loops.checked(request)
        prompt = k.redactor.text(request.prompt)
        event = InboundEvent(
            event_id=event_id or str(uuid.uuid4()),
            adapter=adapter,
            template_id=loops.LOOP_TEMPLATE,
            text=prompt,
            payload={"directory": request.directory, "tier": request.tier},
        )
        task, settings = loops.loop_task(request, prompt, event)
        # the learnings it is given are fixed now, with the task: a resumed task sees
        # the same ones (seed 001, 2.3)
        settings = dataclasses.replace(settings, learnings=await k.learner.learnings_for(prompt))
        # and so are its skills: their names, where they are and their SKILL.md's sha256
        found = await asyncio.to_thread(skills.find, k.home.skills_dir, Path(request.directory))
        settings = dataclasses.replace(settings, skills=found.skills)
        # the skill folders it is not given are told in the commit that creates it
        told = self._skills_skipped(task, found.skipped)
        stored, created = await self._create_entered(
            task,
            settings.priority,
            lambda row: k.journal.loops.create(row, settings, prompt, event, told),
        )
        if not created:
            self._same_event(stored, event)
            return stored
        k.audit.log("task_created", task_id=stored.task_id, template_id="loop", adapter=adapter)
        if secrets := k.redactor.found(request.prompt):
            await self._tell_text_was_redacted(stored, secrets)
        if told:
            for s in found.skipped:
                log.warning("skill not given to task %s: %s", stored.task_id[:8], s.line())
            k.owner.notify()
        k.advance(stored.task_id)
        return stored

    async def start_workflow(self, definition_path: str, directory: str) -> TaskRecord:
        """Run a traced workflow in `directory` (seed 003). If the directory already has
        a trace.md, the workflow's first act is the recovery check on it."""
        k = self._k
        if not k.accepting:
            raise ShuttingDown()
        definition_file = Path(os.path.abspath(definition_path))
        workdir = Path(os.path.abspath(directory))
        definition = load_definition(definition_file)
        if not workdir.is_dir():
            raise PfarError(f"workflow directory {workdir} does not exist")
        task = workflow_task(definition, definition_file, workdir)
        stored, _ = await self._create_entered(task, 0, k.journal.tasks.create)
        k.audit.log("workflow_started", task_id=stored.task_id, directory=str(workdir))
        k.advance(stored.task_id)
        return stored

    async def resume_workflow(self, directory: str, by: Actor = IN_PROCESS) -> TaskRecord:
        """Go on with the workflow in `directory`: its running task, or a new one that
        starts with the recovery check on the trace."""
        k = self._k
        workdir = os.path.abspath(directory)
        task_id = await k.journal.tasks.latest_workflow_task(workdir)
        if task_id is None:
            raise PfarError(
                f"no workflow was started in {workdir}; "
                "start one with `pfar workflow start DEFINITION DIR`"
            )
        task = await k.journal.tasks.get(task_id)
        if task.state.terminal:
            payload = (task.trigger_event or {}).get("payload", {})
            return await self.start_workflow(str(payload["definition"]), workdir)
        if task.state is TaskState.Paused:  # "go on" is the owner's resume
            await k.resume_task(task_id, by)
            return await k.journal.tasks.get(task_id)
        if task.state.working:
            k.advance(task_id)
        return task

    async def _tell_text_was_redacted(self, task: TaskRecord, found: list[str]) -> None:
        """A secret typed into a task's text is never stored: the task gets a marker in
        its place. The owner is told, since what the task saves differs from what was typed."""
        named = ", ".join(found)
        await self._k.journal.events.enqueue(
            [
                OwnerMessage(
                    RedactedInputKey(task.task_id),
                    MessageKind.notice,
                    f"Task {self._k.title(task)} ({task.task_id[:8]}): its text held {named}; "
                    "pfar stored and ran it with [REDACTED:…] in its place, so the task "
                    "never sees the value. To let a task use a secret, name it in the "
                    "template's [[credentials]].",
                    task.task_id,
                )
            ]
        )
        self._k.owner.notify()

    def _skills_skipped(self, task: TaskRecord, skipped: Sequence[Skipped]) -> list[OwnerMessage]:
        """The owner's message naming the skill folders a new task is not given, and why
        (one per task: its key is the task's)."""
        if not skipped:
            return []
        lines = "\n".join(f"- {s.line()}" for s in skipped)
        return [
            OwnerMessage(
                SkillsSkippedKey(task.task_id),
                MessageKind.notice,
                f"Task {self._k.title(task)} ({task.task_id[:8]}) was not given "
                f"{len(skipped)} skill folder{'s' if len(skipped) != 1 else ''}:\n"
                f"{lines}\n`pfar skills --dir DIR` shows what a task there is given.",
                task.task_id,
            )
        ]

    def _same_event(self, stored: TaskRecord, event: InboundEvent) -> None:
        """A redelivered event is the same template and text; anything else reusing the id
        is refused, naming the task that has it. The stored text was redacted with the
        secrets known then: redact it again now, as the new text was, before comparing."""
        first = stored.trigger_event or {}
        if stored.template_id != event.template_id:
            differs = f"template {stored.template_id!r}, not {event.template_id!r}"
        elif self._k.redactor.text(str(first.get("text", ""))) != event.text:
            differs = "a different text"
        else:
            return
        raise EventIdReused(event.event_id, stored.task_id, differs)

    def _reload_template(self, template_id: str) -> Any:
        templates = self._k.templates
        tpl = templates.fresh(template_id)  # raises ConfigError for a malformed file
        if tpl is None:
            known = ", ".join(templates.ids()) or "none"
            raise ConfigError(
                str(self._k.home.templates_dir / f"{template_id}.toml"),
                "",
                f"no such template (known: {known})",
            )
        return tpl

    async def _create_entered(
        self,
        task: TaskRecord,
        priority: int,
        create: Callable[[TaskRecord], Awaitable[tuple[TaskRecord, bool]]],
    ) -> tuple[TaskRecord, bool]:
        """Create a task with its place decided: it takes a slot, or it is created
        Queued, so its creation's commit says TaskStarted only if it starts."""
        admission = self._k.admission
        started = admission.enter(task.task_id, priority)
        try:
            stored, created = await create(task if started else task.queued(priority))
        except BaseException:
            admission.forget(task.task_id)
            raise
        if not created:
            admission.forget(task.task_id)  # a redelivered event: its task exists
        return stored, created


def check_event_id(event_id: object) -> str:
    """Event ids are strings: `True` or `1` would collide with "True" or "1" once stored."""
    if not isinstance(event_id, str):
        raise BadRequest("event_id", f"must be a string, not {type(event_id).__name__}")
    if not event_id.strip() or len(event_id) > MAX_EVENT_ID:
        raise BadRequest("event_id", f"must be 1 to {MAX_EVENT_ID} characters, not all blank")
    if not event_id.isprintable():
        raise BadRequest("event_id", "must not contain control characters")
    return event_id
