"""The owner's words, as every text channel takes them: the stdin adapter's lines and chat
messages alike become operator API calls, and the reply is text to show.

Commands (a leading "/" is optional, as chat apps like it):

    submit TEMPLATE TEXT    loop PROMPT    send ID MESSAGE    tasks
    approve ID    deny ID    answer ID OPTION    cancel ID    pause ID    resume ID    help
    show ID (an approval's whole action: on a chat, a cut action is approved only after it)

On a chat channel, a message that is no command is the owner's work: a reply to a loop
task's message goes to that task; anything else starts a loop task (`[channels]
on_message`). A reply to a credential prompt is the credential: it is stored in the
vault, and the reply says nothing of it.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..answers import in_words, parse_answer
from ..errors import AlreadyDecided, PfarError
from ..journal.message_keys import CredentialKey, MessageKey
from ..kernel.api import Operator
from ..kernel.holds import describe
from ..policy.printable import printable
from . import whole_action

log = logging.getLogger("pfar.adapters")

HELP = (
    "commands: submit TEMPLATE TEXT | loop PROMPT | send ID MESSAGE | tasks | approve ID | "
    "deny ID | answer ID OPTION | show ID | cancel ID | pause ID | resume ID"
)
_VERBS = frozenset(
    {
        "submit",
        "loop",
        "send",
        "tasks",
        "approve",
        "deny",
        "answer",
        "show",
        "cancel",
        "pause",
        "resume",
    }
)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where the owner's words came from: the adapter, the update's id there (so that a
    redelivered update has one effect), and the pfar message it answers, if any."""

    adapter: str
    event_id: str | None = None
    # the pfar message the owner replied to: its outbox key and its task
    reply_to_key: MessageKey | None = None
    reply_to_task: str | None = None


@dataclass(frozen=True, slots=True)
class ChatDefaults:
    """What a chat message that is no command does."""

    on_message: str = "loop"  # "loop", or a template id
    directory: str = "."  # a loop task's directory


def chat_directory(directory: str) -> str:
    """The chat's loop directory, made (owner-only) when it is missing, so that the
    default `~/pfar-work` works on a fresh machine. A folder that cannot be made is
    left to the loop's own check, which names it."""
    path = Path(directory).expanduser()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("cannot make the chat's loop directory %s: %s", path, exc.strerror)
    return str(path)


async def handle(
    operator: Operator,
    text: str,
    origin: Origin,
    defaults: ChatDefaults | None = None,
    *,
    where: str = "",
) -> str:
    """Carry out the owner's words; the reply to show. A refusal is a reply too ("error:
    ..."); one bad message never ends a channel. `where` ("line 3: ") prefixes what is
    wrong with the words themselves (a quote left open)."""
    try:
        return await _handle(operator, text.strip(), origin, defaults)
    except PfarError as exc:
        why = str(exc)
    except ValueError as exc:  # e.g. an unterminated quote
        why = f"{where}{exc}"
    except Exception as exc:  # one bad message must not end the adapter
        log.exception("%s: a message could not be handled", origin.adapter)
        why = f"{where}{exc!r}"
    return "error: " + printable(why, indent="  ")


async def _handle(
    operator: Operator, text: str, origin: Origin, defaults: ChatDefaults | None
) -> str:
    key = origin.reply_to_key
    if defaults is not None and isinstance(key, CredentialKey):
        task = await operator.provide_credential(key.prompt_id, text)
        return f"credential stored in the vault; task {task.task_id[:8]} goes on"
    # on a thread: shlex takes time quadratic in a word's length (~20 s for a word of
    # 1 MiB), and the event loop serves every task and channel meanwhile
    words = await asyncio.to_thread(shlex.split, text) if text else []
    if words and words[0].lstrip("/").lower() in (*_VERBS, "help"):
        words[0] = words[0].lstrip("/").lower()
        return await command(operator, words, origin, defaults)
    if defaults is None:  # the stdin adapter: commands only
        return HELP
    if not text:
        return HELP
    if origin.reply_to_task is not None:
        replied = await operator.task(origin.reply_to_task)
        if replied.template_id == "loop":
            sent = await operator.send(
                replied.task_id, text, event_id=origin.event_id, adapter=origin.adapter
            )
            return f"sent to task {sent.task_id[:8]} ({sent.state.value})"
    if defaults.on_message == "loop":
        started = await operator.start_loop(
            text, defaults.directory, event_id=origin.event_id, adapter=origin.adapter
        )
    else:
        started = await operator.submit(
            defaults.on_message, text, event_id=origin.event_id, adapter=origin.adapter
        )
    return f"task {started.task_id[:8]} started ({started.state.value})"


async def command(
    operator: Operator, words: list[str], origin: Origin, defaults: ChatDefaults | None = None
) -> str:
    match words:
        case ["submit", template, first, *rest]:
            task = await operator.submit(
                template, " ".join([first, *rest]), event_id=origin.event_id, adapter=origin.adapter
            )
            return f"task {task.task_id} submitted ({task.template_id})"
        case ["loop", first, *rest]:
            started = await operator.start_loop(
                " ".join([first, *rest]),
                (defaults or ChatDefaults()).directory,
                event_id=origin.event_id,
                adapter=origin.adapter,
            )
            return f"task {started.task_id[:8]} started ({started.state.value})"
        case ["send", task_id, first, *rest]:
            sent = await operator.send(
                task_id, " ".join([first, *rest]), event_id=origin.event_id, adapter=origin.adapter
            )
            return f"sent to task {sent.task_id[:8]} ({sent.state.value})"
        case ["show", approval_id]:
            return await whole_action.show(operator, approval_id)
        case ["approve" | "deny" as verb, approval_id]:
            if defaults is not None and (
                refused := await whole_action.refusal(operator, approval_id, verb)
            ):
                return refused
            a = await operator.answer(approval_id, parse_answer(verb))
            return f"approval {a.approval_id[:8]}: {a.status.value}" + (
                "" if a.changed else " (already)"
            )
        case ["answer", approval_id, option]:
            if defaults is not None and (
                refused := await whole_action.refusal(operator, approval_id, option)
            ):
                return refused
            a = await operator.answer(approval_id, parse_answer(option))
            return f"approval {a.approval_id[:8]}: {in_words(a.decision)}" + (
                "" if a.changed else " (already)"
            )
        case ["cancel", task_id]:
            return describe(await operator.cancel(task_id))
        case ["pause", task_id]:
            return describe(await operator.pause(task_id))
        case ["resume", task_id]:
            return describe(await operator.resume(task_id))
        case ["tasks", *_]:
            rows = await operator.tasks(limit=20)
            return "\n".join(f"{t.task_id[:8]}  {t.template_id:20} {t.state}" for t in rows) or (
                "no tasks"
            )
    return HELP


async def press(operator: Operator, question_id: str, option: str) -> str:
    """A button under a question: the answer, once. Pressed twice, or after the question
    was answered elsewhere, it changes nothing and says so."""
    try:
        refused = await whole_action.refusal(operator, question_id, option)
        if refused is not None:
            return refused
        a = await operator.answer(question_id, parse_answer(option))
    except AlreadyDecided as exc:
        return "already answered: " + printable(str(exc), indent="  ")
    except PfarError as exc:
        return "error: " + printable(str(exc), indent="  ")
    if not a.changed:
        return f"already answered: {a.decision or a.status.value}"
    return f"{a.decision or a.status.value}: done"
