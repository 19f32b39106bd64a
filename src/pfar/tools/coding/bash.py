"""Bash: a shell command in the working directory, in its own process group.

A command that exits non-zero is not a tool error: its output and exit code are the
result, as a terminal would show them (a failing test run or a `grep` that found
nothing is information the model acts on). The tool fails only when the command could
not run or ran out of time.

The call ends when the shell exits. Its output is read until every process holding it
has closed it, or for a moment more: a background process that keeps the output open
is left running and its later output is not shown. A timeout or a cancellation kills
the whole process group. The shell's pid is journaled before it is waited on, so a
later kernel can end a group that a crash left behind.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import Any, ClassVar, Final

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from .. import task_processes
from ..base import ToolContext, check_args
from ..processes import kill_group
from .text import MAX_CHARS, cap_head_tail

DEFAULT_TIMEOUT: Final = 120.0
# the loop's own limit on one call (`[loop] tool_seconds`, 600 by default) ends it anyway
MAX_TIMEOUT: Final = 600.0
# how long output is still read after the shell exits, for what its children had in flight
_DRAIN_SECONDS: Final = 0.5
# bytes of output kept from each end; what falls between is counted, not kept
_KEEP_BYTES: Final = 4 * MAX_CHARS


class _Output:
    """A command's combined output: its head and tail kept, the middle counted."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = _KEEP_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > _KEEP_BYTES:
            extra = len(self.tail) - _KEEP_BYTES
            del self.tail[:extra]
            self.dropped += extra

    def text(self) -> tuple[str, int]:
        """The output for the model (head and tail within MAX_CHARS) and how much was cut."""
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.dropped:
            head += f"\n[... {self.dropped:,} bytes ...]\n"
        hint = "; redirect the output to a file and Read or Grep it to see all of it"
        text, cut = cap_head_tail(head + tail, hint=hint)
        return text, cut + self.dropped


class Bash:
    """A Write that cannot see its own effect: a command cut off by a crash is never run
    again blind; the owner is asked."""

    name: ClassVar[str] = "Bash"
    description: ClassVar[str] = (
        "Run a bash command (`/bin/bash -c`) in the working directory, with no standard "
        "input. Returns its standard output and standard error combined, in the order "
        "written, and its exit code; a non-zero exit code is reported in the result, not "
        f"as an error. Output over {MAX_CHARS:,} characters keeps its beginning and end "
        "and says how much was cut (redirect long output to a file and Read or Grep it). "
        f"`timeout` is in seconds (default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g}); "
        "on timeout the command and every process it started are killed. Each call is a "
        "new shell: `cd` and variables do not carry over. Prefer Read, Glob, Grep, Edit "
        "and Write to cat, find, grep, sed and echo redirections."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "the command to run"},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": MAX_TIMEOUT,
                "description": f"seconds before it is killed (default {DEFAULT_TIMEOUT:g})",
            },
            "description": {
                "type": "string",
                "description": "what the command does, in a few words, for the owner",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Raw"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Write

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.none

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        seconds = float(args.get("timeout", DEFAULT_TIMEOUT))
        if not ctx.workspace.is_dir():
            raise ToolFailed(f"{self.name}: the working directory {ctx.workspace} is missing")
        env = {**os.environ, "PFAR_TASK_ID": ctx.task_id, "PFAR_STEP": str(ctx.step)}
        # a label every process it starts inherits: ended with the task (task_processes.py)
        env = task_processes.env(env, ctx.task_id)
        argv = ["/bin/bash", "-c", str(args["command"])]
        if ctx.sandbox is not None:
            argv, env = ctx.sandbox.wrap(argv), ctx.sandbox.env(env)
        output = _Output()
        loop = asyncio.get_running_loop()
        try:
            transport, shell = await loop.subprocess_exec(
                lambda: _Shell(output, loop),
                *argv,
                cwd=ctx.workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a timeout kills all of it
            )
        except OSError as exc:
            raise ToolFailed(f"{self.name}: cannot start /bin/bash: {exc}") from None
        pid = transport.get_pid()
        timed_out = False
        try:
            if ctx.started_process is not None:
                await ctx.started_process(pid)
            done, _ = await asyncio.wait({shell.exited}, timeout=seconds)
            if not done:
                timed_out = True
                kill_group(pid)
                await shell.exited
            # what its children wrote before it exited may still be in the pipe
            await asyncio.wait({shell.closed}, timeout=_DRAIN_SECONDS)
        except BaseException:
            kill_group(pid)
            await asyncio.shield(shell.exited)
            raise
        finally:
            transport.close()  # a background process still holding the output gets EPIPE
        code = transport.get_returncode()
        text, cut = output.text()
        if timed_out:
            raise ToolFailed(
                f"{self.name}: the command timed out after {seconds:g}s and was killed, with "
                "every process it started. Give a longer timeout (at most "
                f"{MAX_TIMEOUT:g}s), or run less at once. Its output so far:\n" + (text or "(none)")
            )
        shown = text or "(no output)"
        if code is not None and code < 0:
            shown = shown.rstrip("\n") + f"\n\n[killed by signal {-code}]"
        elif code:
            shown = shown.rstrip("\n") + f"\n\n[exit code {code}]"
        return {"text": shown, "exit_code": code, "cut_chars": cut}

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None


class _Shell(asyncio.SubprocessProtocol):
    """The shell's output as it comes, and two moments: it exited; its output closed.

    Not `asyncio.create_subprocess_exec`: its `wait()` also waits for the output to
    close (Python 3.11), which a background process may hold open for ever.
    """

    def __init__(self, output: _Output, loop: asyncio.AbstractEventLoop) -> None:
        self.output = output
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.output.add(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
