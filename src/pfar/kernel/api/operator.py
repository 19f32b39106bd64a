"""The operator API of a running kernel: what every surface calls.

The control socket (and so the `pfar` command), the stdin adapter, chat adapters and
a web console all act on a kernel through these verbs, and none reaches into the
journal. Each verb takes typed arguments and returns a frozen record (with `to_json`
for the socket); a refusal is a `PfarError` whose message says what to do.

    async with open_kernel(home) as kernel:
        operator = Operator(kernel)
        task = await operator.submit("note", "buy milk")
        await operator.wait_idle()
        for entry in operator.timeline(task.task_id).entries:
            print(entry.at, entry.event)
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ...answers import IN_PROCESS, Actor, Answer
from ...errors import BadRequest, KnowledgeUnavailable, PfarError, UnknownLearning
from ...journal import TaskKind
from ...runners.loop.context import ContextStats
from ...runners.loop.tasks import LoopRequest
from ...vault.knowledge import KnowledgeStore, Learning
from ..admission import Waiting
from ..holds import HoldResult
from ..reload import Reloaded
from ..retrying import RetryResult
from .attach import Shown, stream
from .attach_timeline import timeline_stream
from .channel_host import ChannelHosting
from .console_token import TOKEN_SECRET, ConsoleToken, owner_token
from .conversation import Followed, follow
from .hooks_view import HookView, hook_views
from .mcp_view import McpServerView, live
from .offline import check_subscriber
from .providers_view import ProviderView
from .providers_view import live as providers_live
from .reader import HomeReader
from .records import (
    Answered,
    BusEventView,
    ChannelView,
    EventOffset,
    Pong,
    RecoveryView,
    SecretStored,
    Sent,
    Submitted,
    TaskRef,
    TaskSummary,
)
from .session_verbs import SessionVerbs
from .subscribe import live_events

# the messages `send` acts on instead of sending ("//text" sends "/text")
SLASH = ("/pause", "/cancel", "/resume", "/done", "/retry", "/context")

if TYPE_CHECKING:
    from ..kernel import Kernel, KernelStatistics


class Operator(HomeReader, SessionVerbs):
    """The verbs an owner (or a surface acting for one) uses on a started kernel; its
    reads (`tasks`, `timeline`, `questions`, ...) are `HomeReader`'s, over the kernel's
    own journal."""

    def __init__(self, kernel: Kernel, actor: Actor = IN_PROCESS) -> None:
        super().__init__(kernel.home, kernel.journal)
        self._kernel = kernel
        # who acts through this operator, and through which surface: kept with answers
        self.actor = actor

    def acting_as(self, actor: Actor) -> Operator:
        """The same kernel's operator for another actor (a surface knows who is there)."""
        return Operator(self._kernel, actor)

    # -- the kernel ----------------------------------------------------------------

    def ping(self) -> Pong:
        return Pong(self._kernel.boot_id, os.getpid())

    async def status(self) -> KernelStatistics:
        """Tasks running now, tasks by state, the journal's commits and writes."""
        return await self._kernel.statistics()

    async def wait_idle(self) -> None:
        """Wait until no task is being advanced (tasks parked on the owner do not count)."""
        await self._kernel.wait_idle()

    async def wait_task(self, task_id: str) -> TaskSummary:
        """Wait until this task ends or waits on the owner (other tasks do not count)."""
        whole = await self._kernel.journal.tasks.resolve_id(task_id)
        return TaskSummary.of(await self._kernel.wait_task(whole))

    @property
    def accepting(self) -> bool:
        """The kernel takes new work (recovery is done, and it is not shutting down)."""
        return self._kernel.accepting

    def request_shutdown(self) -> None:
        """Ask the process serving the kernel (`pfar run`) to shut down gracefully."""
        self._kernel.shutdown_requested.set()

    # -- tasks ---------------------------------------------------------------------

    async def submit(
        self, template: str, text: str, *, event_id: str | None = None, adapter: str = "api"
    ) -> Submitted:
        """Create a task from `template` and `text` and start it. The same `event_id`
        with the same template and text twice is one task."""
        task = await self._kernel.submit(template, text, event_id=event_id, adapter=adapter)
        redacted = tuple(self._kernel.redactor.found(text))
        return Submitted(task.task_id, task.template_id, task.state, redacted)

    async def cancel(self, task_id: str) -> HoldResult:
        """End the task as Cancelled: its running step's processes are ended and its
        questions withdrawn."""
        return await self._kernel.cancel_task(task_id, self.actor)

    async def pause(self, task_id: str) -> HoldResult:
        """Pause the task at its next step boundary (at once if nothing runs it)."""
        return await self._kernel.pause_task(task_id, self.actor)

    async def resume(self, task_id: str) -> HoldResult:
        """Continue a paused task from the journal (or withdraw a pause not yet reached)."""
        return await self._kernel.resume_task(task_id, self.actor)

    async def retry(self, task_id: str) -> RetryResult:
        """Retry the task: a Failed task whose failure is recoverable continues from the
        journal where it failed; a loop task waiting for you has its model's answer
        discarded and asked again (`/retry`). Refused, naming the state and why, for any
        other task (not failed; failed, but not recoverably: with what failed)."""
        return await self._kernel.retry_task(task_id, self.actor)

    # -- the owner's answers -------------------------------------------------------

    async def answer(self, approval_id: str, answer: Answer | str) -> Answered:
        """Answer an approval: Approve, Deny, or one of the options it offers (a record of
        pfar.answers, or its name). The same answer again changes nothing (`changed` is
        False); one that does not fit the question is refused (AnswerDoesNotFit)."""
        a, changed = await self._kernel.answer(approval_id, answer, self.actor)
        try:
            task = await self._kernel.journal.tasks.get(a.task_id)
        except PfarError:  # the answer is kept; a damaged task row only leaves this unsaid
            return Answered(a.approval_id, a.status, a.decision, changed, a.task_id)
        return Answered(
            a.approval_id, a.status, a.decision, changed, a.task_id, task.state.value, task.error
        )

    async def provide_credential(self, prompt_id: str, secret: str) -> TaskRef:
        """Store the secret a credential prompt asks for; its task resumes."""
        return TaskRef.of(await self._kernel.provide_credential(prompt_id, secret, self.actor))

    def set_secret(self, name: str, value: str) -> SecretStored:
        """Store secret `name` in the vault; from now on it is redacted wherever it appears."""
        self._kernel.set_secret(name, value)
        return SecretStored(name)

    async def reload(self) -> Reloaded:
        """Read templates, hooks and the settings that can change live again; the answer
        names what changed but needs a restart, and what did not load."""
        return await self._kernel.reload()

    def remove_secret(self, name: str) -> SecretStored:
        """Drop secret `name` from the vault (UnknownSecret when there is none)."""
        self._kernel.remove_secret(name)
        return SecretStored(name)

    async def mcp_servers(self) -> list[McpServerView]:
        """The MCP servers: each one's state and its tools (docs/mcp.md)."""
        return live(self._kernel.mcp, self._kernel.config.mcp, self._kernel.redactor.text)

    async def providers(self) -> list[ProviderView]:
        """The model providers: each one's role and its circuit breaker now."""
        return providers_live(self._kernel.model, self._kernel.redactor.text)

    def hooks(self) -> list[HookView]:
        """The hook handlers listening now (after the last `pfar reload`), in firing order."""
        return hook_views(self._kernel.hooks, self._kernel.redactor.text)

    def last_recovery(self) -> RecoveryView:
        """What this kernel's start recovered, as its report to the owner said it."""
        report = self._kernel.report
        if report is None:
            return RecoveryView(self._kernel.boot_id, "the kernel is still recovering", ())
        kept = report.stored()
        return RecoveryView(self._kernel.boot_id, kept.text, kept.tasks)

    def _running_boot(self, newest: str | None) -> str | None:
        return self._kernel.boot_id

    def console_token(self, *, rotate: bool = False, make: bool = True) -> ConsoleToken:
        """The owner token the web console takes at login (made on first asking), and
        the console's address; `rotate`: a new token, which ends every console session.
        `make=False` (the console's own check) makes none: the token is "" until the
        owner asks for one, and nothing matches it."""
        if make or rotate:
            token, made = owner_token(
                self._kernel.secrets.get, self._kernel.set_secret, rotate=rotate
            )
        else:
            token, made = self._kernel.secrets.get(TOKEN_SECRET) or "", False
        address = self._kernel.home.console_address
        url = address.read_text().strip() if address.exists() else None
        return ConsoleToken(token, made and rotate, url)

    # -- loop tasks --------------------------------------------------------------------

    async def start_loop(
        self,
        prompt: str,
        directory: str,
        *,
        tier: str = "worker",
        once: bool = False,
        title: str = "",
        worktree: bool = False,
        priority: int = 0,
        event_id: str | None = None,
        adapter: str = "api",
    ) -> Submitted:
        """Start an agentic loop task: the model works on `prompt` in `directory` with its
        tools until it ends its turn; then it waits for `send` (or ends, with `once`).
        `worktree`: it works in its own git worktree of the directory's repository."""
        request = LoopRequest(prompt, directory, tier, once, title, worktree, priority)
        task = await self._kernel.start_loop(request, event_id=event_id, adapter=adapter)
        redacted = tuple(self._kernel.redactor.found(prompt))
        return Submitted(task.task_id, task.template_id, task.state, redacted)

    async def send(
        self, task_id: str, text: str, *, event_id: str | None = None, adapter: str = "api"
    ) -> Sent:
        """The owner's message to a loop task. `/pause`, `/cancel` and `/resume` act on the
        task, `/done` ends it with its summary, `/retry` discards the model's last answer
        and asks again (or retries a task that failed recoverably: `retry`), `/context`
        tells how full its context is; "//..." sends a message that starts "/"."""
        command = text.strip().lower()
        holds = {"/pause": self.pause, "/cancel": self.cancel, "/resume": self.resume}
        if command in holds:
            r = await holds[command](task_id)
            return Sent(r.task_id, r.state, command, r)
        if command == "/retry":  # the same verb as `pfar task retry`
            retried = await self.retry(task_id)
            return Sent(retried.task_id, retried.state, command)
        if command == "/context":
            stats = await self._kernel.loop_context(task_id)
            task = await self._kernel.journal.tasks.get(
                await self._kernel.journal.tasks.resolve_id(task_id)
            )
            return Sent(task.task_id, task.state, command, context=stats)
        if command.startswith("/") and not command.startswith("//") and command != "/done":
            raise BadRequest(
                "text", f"{text.strip()!r} is not a command; commands are {', '.join(SLASH)}"
            )
        done = command == "/done"
        message = "" if done else text.strip().removeprefix("/")
        task = await self._kernel.send(
            task_id,
            message if text.strip().startswith("//") else text,
            done=done,
            event_id=event_id,
            adapter=adapter,
        )
        return Sent(task.task_id, task.state, "/done" if done else None)

    async def context(self, task_id: str) -> ContextStats:
        """How full a loop task's context is (`/context`), as the kernel sees it."""
        return await self._kernel.loop_context(task_id)

    async def attach(self, task_id: str, *, from_start: bool = False) -> AsyncIterator[Shown]:
        """A task's work, live. A loop task: the turns since it was last watched (all of
        them, `from_start`), then its streamed text, turns and states until it ends. A
        pipeline or workflow task: its timeline so far, then each new line and state
        until it ends. Leaving (closing the iterator) stops nothing."""
        task = await self._kernel.journal.tasks.get(
            await self._kernel.journal.tasks.resolve_id(task_id)
        )
        if task.kind is not TaskKind.loop:
            return timeline_stream(self._kernel.journal, task.task_id)
        return stream(
            self._kernel.journal, self._kernel.viewers, task.task_id, from_start=from_start
        )

    async def follow_conversation(self, task_id: str, after: int = -1) -> AsyncIterator[Followed]:
        """A loop task's turns after `after`, then, live, its streamed text, new turns and
        states until it ends; like `conversation`, it moves no viewer's mark."""
        first = await self.conversation(task_id, after)  # refuses a bad id, kind or seq
        return follow(self._kernel.journal, self._kernel.viewers, first.task_id, after)

    # -- the event bus ------------------------------------------------------------------

    async def ack_events(self, subscriber: str, seq: int) -> EventOffset:
        """`subscriber` has handled every event up to `seq`: it goes on after it, also
        after a restart of its own or of the kernel."""
        check_subscriber(subscriber)
        if seq < 0:
            raise BadRequest("seq", "must be 0 or more")
        await self._kernel.journal.events.bus_ack(subscriber, seq)
        return EventOffset(
            subscriber, await self._kernel.journal.events.bus_offset(subscriber) or 0
        )

    async def subscribe(
        self, after: int | None = None, *, task_id: str | None = None
    ) -> AsyncIterator[BusEventView]:
        """The bus's events after `after` (None: only those committed from now on), then
        each one as it is committed, in order, until the view closes it or the kernel
        stops; only `task_id`'s (an id or a unique prefix), when given. A live view keeps
        no offset: it subscribes again from the last `seq` it was given (api/subscribe.py)."""
        if after is not None and after < 0:
            raise BadRequest("after", "must be 0 or more")
        journal = self._kernel.journal
        whole = None if task_id is None else await journal.tasks.resolve_id(task_id)
        start = await journal.events.bus_last() if after is None else after
        return live_events(journal, self._kernel.bus_bell, start, whole)

    # -- the queue -----------------------------------------------------------------------

    async def queue(self) -> list[Waiting]:
        """What waits, and why: tasks waiting for a slot (`[scheduler] max_concurrent`) or
        rate headroom, the next first; tool calls waiting for a resource lock another
        task holds; and each cron template's next slot."""
        kernel = self._kernel
        return [
            *kernel.admission.waiting(),
            *kernel.locks.waiting(),
            *kernel.scheduler.upcoming(),
        ]

    # -- the knowledge store -------------------------------------------------------------

    async def learnings(self, search: str | None = None, limit: int = 50) -> list[Learning]:
        """What tasks learned: the newest, or the ones most relevant to `search`."""
        if not 1 <= limit <= 1000:
            raise BadRequest("limit", "must be between 1 and 1000")
        return self._knowledge().search(search, limit)

    async def forget_learning(self, learning_id: str) -> Learning:
        """Drop a learning (by its id or a unique prefix): no later task is given it."""
        found = self._knowledge().forget(learning_id)
        if found is None:
            raise UnknownLearning(learning_id)
        return found

    def _knowledge(self) -> KnowledgeStore:
        if self._kernel.knowledge is None:
            raise KnowledgeUnavailable()
        return self._kernel.knowledge

    # -- chat channels ----------------------------------------------------------------

    async def channels(self) -> list[ChannelView]:
        """Each chat channel: connected, retrying or degraded, its last error, its position
        (a Telegram offset, say) and its deliveries by status."""
        out = []
        for name, st in self._kernel.channel_states.items():
            journal = self._kernel.journal
            waiting = await journal.adapters.outbox_state(name)
            out.append(
                ChannelView(
                    name,
                    st.state,
                    st.last_error,
                    st.since,
                    st.failures,
                    await journal.adapters.get(name),
                    await journal.adapters.delivery_counts(name),
                    waiting.last_error,
                    waiting.next_try,
                )
            )
        return out

    @property
    def hosting(self) -> ChannelHosting:
        """What the host of the chat channels (adapters/supervisor.py) may do beside the
        verbs: each channel's outbox, position and state, and the kernel's hooks for
        them (api/channel_host.py)."""
        return ChannelHosting(self._kernel)
