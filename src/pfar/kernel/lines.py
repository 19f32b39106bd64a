"""Lines from a stream (stdin, the control socket), with a limit that never ends the stream.

asyncio's `readline` raises at its buffer limit and leaves the reader out of step: the
rest of the long line would be read as a line of its own. Here a line over the limit is
reported (as None) and skipped whole, and the next line is read as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

MAX_LINE = 1 << 20
MAX_LINE_TEXT = "1 MiB (1048576 bytes)"


async def read_lines(
    stream: asyncio.StreamReader, limit: int = MAX_LINE
) -> AsyncIterator[bytes | None]:
    """Each line of `stream` without its newline; None for a line over `limit` bytes."""
    buf = b""
    skipping = False  # inside a line already reported as too long
    while chunk := await stream.read(1 << 16):
        seen = len(buf)  # what was there before holds no newline
        buf += chunk
        while (end := buf.find(b"\n", seen)) >= 0:
            line, buf, seen = buf[:end], buf[end + 1 :], 0
            if skipping:
                skipping = False
            elif len(line) > limit:
                yield None
            else:
                yield line
        if len(buf) > limit:
            if not skipping:
                yield None
                skipping = True
            buf = b""
    if buf and not skipping:
        yield buf
