"""The two kinds of hook handler: a Python callable and a shell command.

A Python handler is `module:function` (from `config.toml` or an entry point in the
`pfar.hooks` group). It is called with the event (a dict) and returns a decision
dict or None; a coroutine function is awaited. A shell command runs with `/bin/sh -c`,
gets the event as JSON on stdin and prints its decision as JSON on stdout; exit status
2 blocks with its stderr as the reason (as Claude Code's hooks do), any other non-zero
status is a failure. Each handler has its own timeout: a command still running then is
killed with its process group; a Python function is left behind (a thread cannot be
killed) and its answer ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..hook_points import HookPoint
from .verdicts import Decision, HandlerFailed, parse_decision, parse_output

BLOCK_STATUS = 2
_STDERR_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class PythonHandler:
    point: HookPoint
    target: str  # module:function
    function: Callable[[dict[str, Any]], Any]
    timeout: float
    tools: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.target

    async def decide(self, event: dict[str, Any]) -> Decision:
        try:
            async with asyncio.timeout(self.timeout):
                if inspect.iscoroutinefunction(self.function):
                    raw = await self.function(dict(event))
                else:
                    raw = await asyncio.to_thread(self.function, dict(event))
        except TimeoutError:
            raise HandlerFailed(f"did not answer within {self.timeout:g} s") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler's bug is its failure, never the kernel's
            raise HandlerFailed(f"raised {exc!r}") from None
        return parse_decision(self.point, raw)


@dataclass(frozen=True, slots=True)
class ShellHandler:
    point: HookPoint
    command: str
    timeout: float
    tools: frozenset[str] = frozenset()
    cwd: Path | None = None
    label: str = ""  # how logs and the owner's messages name it (default: the command)

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        return self.command if len(self.command) <= 60 else self.command[:59] + "…"

    async def decide(self, event: dict[str, Any]) -> Decision:
        data = json.dumps(event, ensure_ascii=False, default=str).encode()
        env = {
            **os.environ,
            "PFAR_HOOK": str(self.point),
            "PFAR_TASK_ID": event.get("task_id") or "",
        }
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own group: a timeout ends all it started
                cwd=self.cwd,
                env=env,
            )
        )
        try:
            proc = await asyncio.shield(spawn)
        except OSError as exc:
            raise HandlerFailed(f"could not be started: {exc}") from None
        except asyncio.CancelledError:
            # cancelled while it was being started (the kernel stopping): let the start
            # finish, then end its whole group (a shell's children would hold its pipes)
            with contextlib.suppress(Exception):
                _kill_group((await spawn).pid)
            raise
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate(data)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise HandlerFailed(f"did not answer within {self.timeout:g} s") from None
        except BaseException:
            _kill_group(proc.pid)
            raise
        said = err.decode("utf-8", errors="replace").strip()[:_STDERR_LIMIT]
        if proc.returncode == BLOCK_STATUS:
            return Decision("block", said or f"blocked by {self.name}")
        if proc.returncode != 0:
            raise HandlerFailed(
                f"exited with status {proc.returncode}" + (f": {said}" if said else "")
            )
        return parse_output(self.point, out)


Handler = PythonHandler | ShellHandler


def resolve(target: str) -> Callable[[dict[str, Any]], Any]:
    """`module:function` imported; ValueError naming what is missing."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{target!r} is not module:function")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(f"module {module_name!r} cannot be imported: {exc}") from None
    found: Any = module
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise ValueError(f"{module_name} has no {attr!r}")
    if not callable(found):
        raise ValueError(f"{target} is not callable")
    return found  # type: ignore[no-any-return]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
