"""The CLI adapter: stdin lines become events and answers; owner messages go to stdout.

Lines it understands (everything else is an error it prints, never a crash):
  submit TEMPLATE TEXT...     approve ID     deny ID     answer ID OPTION     tasks
  cancel ID     pause ID     resume ID
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import stat
import sys
from typing import TextIO

from ..journal import OwnerMessage
from ..kernel.api import Operator
from ..kernel.lines import MAX_LINE_TEXT, read_lines
from ..kernel.terminal import say, write
from ..policy.printable import printable
from .commands import Origin, handle

log = logging.getLogger("pfar.adapters.cli")


class StdoutSink:
    """Owner messages on the terminal. A message's own lines after its first are indented,
    so only pfar's "[pfar → owner]" starts a line at the left margin."""

    name = "cli"

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._dead = False

    async def deliver(self, message: OwnerMessage) -> None:
        if self._dead or message.sink.startswith("channel:"):
            return  # a chat's own answer (or notice): said there, and in owner.log
        text = f"\n[pfar → owner] {printable(message.body, indent='    ')}\n"
        if not write(self._out, text):
            self._dead = True
            log.warning("stdout cannot be written; owner messages go to owner.log only")


async def read_commands(operator: Operator, stream: asyncio.StreamReader) -> None:
    """Run each line of `stream` as a command through the operator API; print its reply."""
    try:
        await _read_commands(operator, stream)
    except OSError as exc:
        # EIO: the kernel went to the background (Ctrl-Z, bg) and may not read its
        # terminal any more; it goes on without it
        say(f"pfar: stdin is not read any more ({exc.strerror}); use the pfar commands")


async def _read_commands(operator: Operator, stream: asyncio.StreamReader) -> None:
    n = 0
    async for line in read_lines(stream):
        n += 1
        if line is None:
            reply = f"error: line {n}: over {MAX_LINE_TEXT}; ignored"
        elif not (text := line.decode(errors="replace").strip()):
            continue
        else:
            reply = await _reply(operator, text, n)
        # a reply that cannot be written is lost; the next line is still read and done
        write(sys.stdout, printable(reply, indent="") + "\n")


async def _reply(operator: Operator, text: str, n: int) -> str:
    return await handle(operator, text, Origin("cli"), where=f"line {n}: ")


async def stdin_reader() -> asyncio.StreamReader | None:
    if sys.stdin is None or sys.stdin.closed or not sys.stdin.readable():
        return None
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty()):
        # /dev/null (a background job, a service) or a file: nothing to watch (the event
        # loop cannot poll them, and would say so in a traceback)
        return None
    if sys.stdin.isatty():
        # a kernel in the background never stops on its terminal: a read gets EIO instead
        # of SIGTTIN (read_commands then stops reading), a write goes on (no SIGTTOU)
        signal.signal(signal.SIGTTIN, signal.SIG_IGN)
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        if not in_foreground(sys.stdin.fileno()):
            # `pfar run &`: the terminal is the shell's; the kernel does not read it
            say("pfar: started in the background: commands on the terminal are not read")
            return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (ValueError, OSError):
        return None
    return reader


def in_foreground(fd: int) -> bool:
    """This process's group owns the terminal on `fd` (it may read it without stopping)."""
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:  # no controlling terminal: reading it would not stop us, nor work
        return False
