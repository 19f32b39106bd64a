"""`pfar run`: the kernel in the foreground, with the CLI adapter on stdin/stdout and the
owner's chat channels."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import click

from ..answers import Actor
from . import ready
from .output import home_of


@click.command()
@click.option("--no-stdin", is_flag=True, help="Do not read commands from stdin.")
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False),
    help="Write this file (the kernel's pid) once the kernel takes requests; removed "
    "when it stops. A script waits for it instead of sleeping.",
)
@click.pass_context
def run(ctx: click.Context, no_stdin: bool, ready_file: str | None) -> None:
    """Run the kernel in the foreground (CLI adapter on stdin/stdout)."""
    from ..adapters import run as channels_run
    from ..adapters.cli import StdoutSink, read_commands, stdin_reader
    from ..config import Config
    from ..console.serve import serve as console_serve
    from ..kernel.api import Operator
    from ..kernel.process import serve
    from ..kernel.terminal import say

    home = home_of(ctx)
    if ready_file is not None:
        ready.clear(Path(ready_file))

    async def main() -> int:
        commands = None if no_stdin else await stdin_reader()

        def started(kernel: Any) -> None:
            # this kernel holds the home: a console address left there is a killed
            # kernel's, and names a port no one listens on (the console writes its own)
            home.console_address.unlink(missing_ok=True)
            for e in kernel.template_errors:
                for problem in e.each:  # one line each, with its key
                    say(f"template not loaded: {problem}")
            say(
                f"pfar kernel running on {home.root} (pid {__import__('os').getpid()}, "
                f"boot {kernel.boot_id[:8]})"
            )
            if ready_file is not None:
                ready.write(Path(ready_file))

        config = Config.load(home.config)
        chats: list[Any] = []

        async def before_start(kernel: Any) -> None:
            # the vault opens during start: a channel reads its secrets when it runs
            def secret(name: str) -> str | None:
                return kernel.secrets.get(name)  # type: ignore[no-any-return]

            chats.extend(channels_run.build(config, secret, str(home.config)))
            await channels_run.listen_early(chats)

        def extra(kernel: Any) -> list[asyncio.Task[None]]:
            tasks = []
            if commands is not None:
                # the terminal `pfar run` reads is the owner's: its answers say so
                at_terminal = Operator(kernel, Actor("stdin", f"uid {os.getuid()}"))
                tasks.append(asyncio.create_task(read_commands(at_terminal, commands)))
            if chats:
                tasks.append(channels_run.start(Operator(kernel), config, chats))
            if config.console.enabled:
                owner_operator = Operator(kernel)
                tasks.append(
                    asyncio.create_task(console_serve(owner_operator, config.console, home))
                )
            return tasks

        return await serve(
            home,
            sinks=[StdoutSink()],
            on_started=started,
            extra=extra,
            before_start=before_start,
        )

    try:
        code = asyncio.run(main())
    finally:
        if ready_file is not None:
            ready.remove(Path(ready_file))
    sys.exit(code)
