"""The kernel as a process: `pfar run`. Signals, the control socket, fail-stop, exit codes."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable

from ..config import Config
from ..errors import PfarError
from ..vault.home import Home
from . import descriptors, fail_stop
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
    """Run a kernel until SIGTERM/SIGINT (graceful) or a vault write fails (fail-stop).
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
    started = asyncio.Event()
    reloads: set[asyncio.Task[None]] = set()

    def hangup() -> None:  # SIGHUP: `pfar reload`, its answer on the terminal
        if not started.is_set():
            say("pfar: SIGHUP while the kernel starts: nothing reloaded (it is loading now)")
            return
        task = asyncio.create_task(_reload(kernel))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    # set before the start: SIGHUP's default would end the process
    loop.add_signal_handler(signal.SIGHUP, hangup)
    if before_start is not None:
        await before_start(kernel)
    await kernel.start()
    await _slow_start()
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
    started.set()
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

    failure = kernel.fail_stopped
    if failure is not None:
        # fail-stop (kernel/fail_stop.py): the owner hears why on every channel that
        # still works, before the chat channels stop
        why = fail_stop.cause(failure, home.sessions_db)
        kept = "on disk" if kernel.journal.path is not None else "committed on the server"
        say(
            f"pfar: stopping without a clean shutdown (fail-stop): {why} The next start "
            f"recovers from what is {kept}."
        )
        message = fail_stop.notice(kernel.boot_id, why)
        # (the terminal has it from the line above)
        await fail_stop.tell_owner(message, [kernel.owner.log, *kernel.last_words])
        await stop_extras()
        await control.close()
        await kernel.abort()
        return 3
    # the socket answers "shutting down" while in-flight tasks finish: a client that
    # finds no socket would tell its user that no kernel is running. The chat channels
    # (extras) stop after the wait, so what tasks finishing during it say reaches chat
    _stopping(kernel, loop)
    kernel.before_close.append(stop_extras)
    left = await kernel.shutdown()
    await control.close()
    if left:
        say(f"pfar: {len(left)} task(s) left in the journal for the next start")
    if kernel.failure:
        say(f"pfar: the kernel stopped itself: {kernel.failure}")
        return 4
    say("pfar kernel shut down cleanly")
    # stopped at once by a second signal: 130, as a shell reports an interrupted command
    return STOPPED_AT_ONCE if kernel.stop_now.is_set() and left else 0


STOPPED_AT_ONCE = 130


def _stopping(kernel: Kernel, loop: asyncio.AbstractEventLoop) -> None:
    """Say what a graceful stop waits for and for how long; a second SIGINT or SIGTERM
    ends the wait at once (the tasks it cuts short are resumed by the next start)."""

    def at_once() -> None:
        if not kernel.stop_now.is_set():
            say("pfar: stopping at once; running tasks are left to the next start's recovery")
            kernel.stop_now.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, at_once)
    running = kernel.running_ids()
    if not running:
        say("pfar: stopping (no task is running)")
        return
    ids = ", ".join(t[:8] for t in running[:5]) + (", …" if len(running) > 5 else "")
    timeout = kernel.config.recovery.shutdown_timeout_seconds
    say(
        f"pfar: stopping: waiting up to {timeout:g}s for {len(running)} running "
        f"task{'s' if len(running) != 1 else ''} ({ids}) to finish their step; Ctrl-C "
        "again stops at once (the next start resumes them)"
    )


# Test-only, like PFAR_FAULT: seconds the kernel waits between taking its home and opening
# its control socket, so that tests see a start as slow as a loaded machine's.
SLOW_START_ENV = "PFAR_FAULT_SLOW_START"


async def _slow_start() -> None:
    raw = os.environ.get(SLOW_START_ENV)
    if raw:
        await asyncio.sleep(float(raw))


async def _reload(kernel: Kernel) -> None:
    try:
        done = await kernel.reload()
    except PfarError as exc:
        say(f"pfar: reload: {exc}")
        return
    for line in done.lines():
        say(f"pfar: reload: {line}")
