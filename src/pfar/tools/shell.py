"""shell.run: a command in the task workspace. A Write with no idempotency: never retried blind.

Secrets reach a command only through its environment or its stdin, from the
template's `[[credentials]]`: a command line is readable by every local user
(`ps`, /proc/PID/cmdline), an environment and a pipe are not.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

from ..errors import ToolFailed
from ..journal.records import Idempotency, Semantics
from . import task_processes
from .base import ToolContext, check_args
from .processes import kill_group

_MAX_OUTPUT = 16 * 1024


class ShellRun:
    name: ClassVar[str] = "shell.run"
    description: ClassVar[str] = (
        "Run a command (argv list, no shell) in the task workspace; `stdin` is optional text "
        "for its standard input."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "argv": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "the program and its arguments; no shell reads them",
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "environment variables to add",
            },
            "stdin": {"type": "string", "description": "text for its standard input"},
        },
        "required": ["argv"],
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
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PFAR_TASK_ID": ctx.task_id, "PFAR_STEP": str(ctx.step)}
        env.update({str(k): str(v) for k, v in args.get("env", {}).items()})
        stdin: str | None = args.get("stdin")
        for cred in ctx.credentials:
            if cred.tool != self.name:
                continue
            env.update({name: ctx.expand(value) for name, value in cred.env})
            if cred.stdin is not None:
                if stdin is not None:
                    raise ToolFailed(
                        f"{self.name}: the template feeds this command's stdin with a "
                        "credential, so the plan cannot give it stdin too"
                    )
                stdin = ctx.expand(cred.stdin)
        # a label every process it starts inherits, set last so the plan's `env` cannot
        # change it: its processes are ended with the task (task_processes.py)
        env = task_processes.env(env, ctx.task_id)
        argv = list(args["argv"])
        if ctx.sandbox is not None:
            argv, env = ctx.sandbox.wrap(argv), ctx.sandbox.env(env)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=ctx.workspace,
            env=env,
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills all of it
        )
        try:
            if ctx.started_process is not None:
                await ctx.started_process(proc.pid)
            out, err = await proc.communicate(None if stdin is None else stdin.encode())
        except asyncio.CancelledError:
            kill_group(proc.pid)
            await proc.wait()
            raise
        if proc.returncode != 0:
            raise ToolFailed(
                f"{self.name}: {args['argv'][0]} exited with {proc.returncode}: "
                f"{err.decode(errors='replace')[-300:]}"
            )
        return {
            "exit_code": proc.returncode,
            "stdout": out.decode(errors="replace")[:_MAX_OUTPUT],
            "stderr": err.decode(errors="replace")[:_MAX_OUTPUT],
        }

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None
