"""The kernel as a process: `pfar run`. Signals, the control socket, fail-stop, exit codes."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

from ..config import Config
from ..vault.home import Home
from . import descriptors
from .control import ControlServer
from .kernel import Kernel
from .owner import Sink
from .terminal import LogFormatter, StderrHandler, say


async def serve(
    home: Home,
    *,
    sinks: list[Sink] | None = None,
    on_started: Callable[[Kernel], None] | None = None,
    extra: Callable[[Kernel], list[asyncio.Task[None]]] | None = None,
    before_start: Callable[[Kernel], Awaitable[None]] | None = None,
) -> int:
    """Run a kernel until SIGTERM/SIGINT (graceful) or a journal failure (fail-stop).
    `before_start` runs before recovery (a listener that answers "not yet" meanwhile)."""
    config = Config.load(home.config)
    # a flood of idle connections must not use up the descriptors the journal needs
    descriptors.raise_limit()
    kernel = Kernel(home, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    descriptors.AcceptErrors(loop).install(loop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if before_start is not None:
        await before_start(kernel)
    await kernel.start()
    # pfar's log lines go to stderr through one handler that redacts secrets, escapes
    # control characters and never raises
    handler = StderrHandler()
    handler.addFilter(kernel.log_filter)
    handler.setFormatter(LogFormatter("pfar: %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("pfar").addHandler(handler)
    logging.getLogger("pfar").propagate = False
    for sink in sinks or []:
        kernel.add_sink(sink)
    kernel.owner.notify()
    control = ControlServer(kernel)
    await control.start()
    if on_started is not None:
        on_started(kernel)
    extras = extra(kernel) if extra else []
    waiters = [
        asyncio.create_task(stop.wait()),
        asyncio.create_task(kernel.shutdown_requested.wait()),
        asyncio.create_task(kernel.stopped.wait()),
    ]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for w in waiters:
        w.cancel()

    async def stop_extras() -> None:
        for t in extras:
            t.cancel()
        await asyncio.gather(*extras, return_exceptions=True)

    if kernel.journal.writer.failure is not None:
        await stop_extras()
        await control.close()
        say(
            "pfar: the journal could not be written; stopped without a clean "
            "shutdown. The next start recovers from what is on disk."
        )
        await kernel.abort()
        return 3
    # the socket answers "shutting down" while in-flight tasks finish: a client that
    # finds no socket would tell its user that no kernel is running. The chat channels
    # (extras) stop after the wait, so what tasks finishing during it say reaches chat
    kernel.before_close.append(stop_extras)
    left = await kernel.shutdown()
    await control.close()
    if left:
        say(f"pfar: {len(left)} task(s) left in the journal for the next start")
    if kernel.failure:
        say(f"pfar: the kernel stopped itself: {kernel.failure}")
        return 4
    say("pfar kernel shut down cleanly")
    return 0
