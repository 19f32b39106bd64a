"""The kernel's stdout and stderr: shown safely, and never fatal when nobody reads them.

The kernel's work lives in the vault; its terminal is only a view. A closed pipe, a
terminal that went away or a full disk under a redirected log must cost that view, never
a task: a write that fails points the stream at /dev/null (so later writes, and Python's
own flush at exit, succeed quietly) after one line saying so where that is still possible.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TextIO

from ..policy.printable import printable


def write(stream: TextIO, text: str) -> bool:
    """Write and flush `text`; False (and the stream silenced) when it cannot be written."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):  # ValueError: the stream was closed under us
        silence(stream)
        return False
    return True


def say(text: str) -> None:
    """One line to whoever runs the kernel, on stderr."""
    write(sys.stderr, printable(text, indent="    ") + "\n")


def silence(stream: TextIO) -> None:
    """Send what goes to `stream` from now on, and what its buffer still holds, nowhere."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    except OSError:
        return
    finally:
        os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        stream.flush()


class LogFormatter(logging.Formatter):
    """Log lines carry outside text (a tool's error, a server's answer): shown escaped,
    continuation lines indented so they cannot pass for a line of their own."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), indent="    ")


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler whose own failure is never an error of the kernel's: a line that cannot be
    written is dropped, and the stream is silenced so the next ones cost nothing."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError | ValueError):
            silence(self.stream)
        # anything else (a record that does not format) is dropped: never raised, never
        # printed to a stderr that may be the very thing that failed
