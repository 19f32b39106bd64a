"""shell.run: a command in the task workspace. A Write with no idempotency: never retried blind."""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

from ..errors import ToolFailed
from ..journal.records import Idempotency, Semantics
from .base import ToolContext
from .processes import kill_group

_MAX_OUTPUT = 16 * 1024


class ShellRun:
    name: ClassVar[str] = "shell.run"
    description: ClassVar[str] = "Run a command (argv list, no shell) in the task workspace."
    result_label: ClassVar[str] = "Raw"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Write

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.none

    def validate(self, args: dict[str, Any]) -> None:
        argv = args.get("argv")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise ToolFailed(f"{self.name}: argument 'argv' must be a non-empty list of strings")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PFAR_TASK_ID": ctx.task_id, "PFAR_STEP": str(ctx.step)}
        env.update({str(k): str(v) for k, v in ctx.resolve(args.get("env", {})).items()})
        proc = await asyncio.create_subprocess_exec(
            *ctx.resolve(args["argv"]),
            cwd=ctx.workspace,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills all of it
        )
        try:
            if ctx.started_process is not None:
                await ctx.started_process(proc.pid)
            out, err = await proc.communicate()
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
