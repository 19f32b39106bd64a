"""Read: a text file with numbered lines, a window of it at a time."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any, ClassVar, Final

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import Resource, ToolContext, check_args, file_resource
from .beneath import open_file
from .paths import place
from .text import MAX_CHARS, looks_binary

DEFAULT_LIMIT: Final = 2000
# a line longer than this is cut (minified code would otherwise fill the window alone)
MAX_LINE: Final = 2000
# past the window, the most of a file read to count its lines and hash it
MAX_SCAN: Final = 64 << 20
_CHUNK: Final = 1 << 20
# the bytes kept of a line while it is read: MAX_LINE characters of UTF-8 at most
_KEEP: Final = 4 * MAX_LINE + 4


class Read:
    """Reads change nothing: after a crash a cut-off Read simply runs again (`check`
    finds no effect to reuse)."""

    name: ClassVar[str] = "Read"
    description: ClassVar[str] = (
        "Read a text file from the working directory. Returns its lines numbered like "
        "`cat -n` (line number, a tab, the line), from line `offset` (1-based, default 1) "
        f"for `limit` lines (default {DEFAULT_LIMIT}). Lines over {MAX_LINE} characters "
        f"are cut, and the whole result is capped at {MAX_CHARS:,} characters; a note at "
        "the end says which offset reads on. The line numbers are not part of the file: "
        "leave them out of Edit's old_string. Binary files are refused. Paths are "
        "relative to the working directory, or absolute inside it."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "minLength": 1,
                "description": "the file to read (relative, or absolute inside the directory)",
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "the first line to show, 1-based (default 1)",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"how many lines to show (default {DEFAULT_LIMIT})",
            },
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def resources(self, args: dict[str, Any], workspace: Path) -> tuple[Resource, ...]:
        return file_resource(workspace, args.get("file_path"), "shared")

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Read

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        # off the event loop: a big file must not stall every other task
        return await asyncio.to_thread(self._read, args, ctx)

    def _read(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        value = str(args["file_path"])
        offset = int(args.get("offset", 1))
        limit = int(args.get("limit", DEFAULT_LIMIT))
        with place(ctx, value, self.name) as at:
            fd = open_file(at, self.name, value)
            name = at.relative
        with os.fdopen(fd, "rb", buffering=0) as f:
            window = _Window(offset, limit)
            head = f.read(_CHUNK)
            if looks_binary(head[:8192]):
                raise ToolFailed(
                    f"{self.name}: {value} is a binary file, not text; "
                    "inspect it with Bash (e.g. `file`, `xxd | head`)"
                )
            chunk = head
            while chunk:
                window.feed(chunk)
                if window.done() and window.scanned >= MAX_SCAN:
                    break  # past the window and the scan's cap: counting stops here
                chunk = f.read(_CHUNK)
            else:
                window.end()
        total = window.total
        if total == 0:
            text = f"({name} is empty)"
        elif total is not None and offset > total:
            raise ToolFailed(
                f"{self.name}: {value} has {total} lines; offset {offset} is past its end"
            )
        else:
            text = "".join(window.out)
            last = window.last_shown
            if total is None or last < total:
                why = (
                    f"capped at {MAX_CHARS:,} characters"
                    if window.capped
                    else f"limit {limit} lines reached"
                )
                of = (
                    f"of {total}"
                    if total is not None
                    else f"of a file over {MAX_SCAN >> 20} MB, whose lines were not all counted"
                )
                text += (
                    f"\n[Showed lines {offset}-{last} {of} ({why}). "
                    f"Read on with offset={last + 1}.]"
                )
        return {
            "text": text,
            "file_path": name,
            "first_line": offset,
            "last_line": window.last_shown,
            "total_lines": total,
            "sha256": window.digest.hexdigest() if total is not None else None,
        }

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None


class _Window:
    """Lines `offset`..`offset + limit - 1` of a file fed in chunks, each cut at
    MAX_LINE characters while it is read (a one-line file of any size keeps only its
    start in memory); the lines outside the window are only counted."""

    def __init__(self, offset: int, limit: int) -> None:
        self.first, self.stop = offset, offset + limit
        self.digest = hashlib.sha256()
        self.out: list[str] = []
        self.size = 0
        self.capped = False
        self.last_shown = offset - 1
        self.line = 1  # the number of the line being read
        self.kept = bytearray()  # its start
        self.length = 0  # its length in bytes so far
        self.scanned = 0
        self.total: int | None = None

    def done(self) -> bool:
        return self.capped or self.line >= self.stop

    def feed(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.scanned += len(chunk)
        at = 0
        while at < len(chunk):
            if not self.first <= self.line < self.stop or self.capped:
                # outside the window: count its line ends, stopping at the window's start
                ends = chunk.count(b"\n", at)
                if self.line < self.first and self.line + ends >= self.first:
                    nl = at
                    for _ in range(self.first - self.line):
                        nl = chunk.index(b"\n", nl) + 1
                    self.line, self.length, at = self.first, 0, nl
                    continue
                self.line += ends
                last = chunk.rfind(b"\n", at)
                tail = len(chunk) - (last + 1) if last >= 0 else len(chunk) - at
                self.length = tail if last >= 0 else self.length + tail
                return
            nl = chunk.find(b"\n", at)
            piece = chunk[at : nl if nl >= 0 else len(chunk)]
            room = _KEEP - len(self.kept)
            if room > 0:
                self.kept += piece[:room]
            self.length += len(piece)
            if nl < 0:
                return
            self._line_done()
            at = nl + 1

    def end(self) -> None:
        """The file ended: a last line without a newline counts too."""
        if self.length:
            if self.first <= self.line < self.stop and not self.capped:
                self._line_done()
            else:
                self.line += 1
        self.total = self.line - 1

    def _line_done(self) -> None:
        text = self.kept.decode("utf-8", errors="replace").rstrip("\r")
        if len(text) > MAX_LINE or self.length > len(self.kept):
            text = text[:MAX_LINE] + f" [... line cut at {MAX_LINE} characters]"
        entry = f"{self.line:>6}\t{text}\n"
        if self.size + len(entry) > MAX_CHARS and self.out:
            self.capped = True
        else:
            self.out.append(entry)
            self.size += len(entry)
            self.last_shown = self.line
        self.line += 1
        self.kept.clear()
        self.length = 0
