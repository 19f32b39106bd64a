"""Glob: files whose path matches a pattern, newest first."""

from __future__ import annotations

import asyncio
import heapq
import os
from typing import Any, ClassVar, Final

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import ToolContext, check_args
from .beneath import open_dir
from .paths import place, protection
from .patterns import compile_glob
from .walk import Walked, walk_files

MAX_FILES: Final = 1000


class Glob:
    """A read: after a crash it simply runs again."""

    name: ClassVar[str] = "Glob"
    description: ClassVar[str] = (
        "Find files by name pattern, e.g. `**/*.py` (every .py file at any depth), "
        "`src/**/*.{ts,tsx}`, `*.md` (top level only). `*` matches within one directory "
        "level, `**` across levels, `{a,b}` either. Searches the working directory, or "
        "`path` (a directory inside it); `.git` and protected paths are skipped. Returns "
        "matching file paths "
        f"relative to the working directory, newest first (by modification time), at most "
        f"{MAX_FILES}, with a note when there are more."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "the glob pattern, relative to `path`",
            },
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "the directory to search (default: the working directory)",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Read

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)
        pattern = str(args["pattern"])
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise ToolFailed(
                f"{self.name}: pattern {pattern!r} must be relative, without '..'; "
                "give the directory to search as `path`"
            )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        # off the event loop: a walk over a big tree must not stall every other task
        return await asyncio.to_thread(self._glob, args, ctx)

    def _glob(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        where = str(args.get("path", "."))
        matcher = compile_glob(str(args["pattern"]))
        walked = Walked()
        newest: list[tuple[int, str]] = []  # a heap of the MAX_FILES newest matches
        count = 0
        with place(ctx, where, self.name) as at:
            top = open_dir(at, self.name, where)
            try:
                skip = len(at.parts)
                for found in walk_files(top, at.parts, at.root, protection(ctx), walked):
                    if not matcher.match("/".join(found.parts[skip:])):
                        continue
                    try:
                        mtime = found.entry.stat(follow_symlinks=False).st_mtime_ns
                    except OSError:
                        continue  # gone meanwhile
                    count += 1
                    item = (mtime, "/".join(found.parts))
                    if len(newest) < MAX_FILES:
                        heapq.heappush(newest, item)
                    else:
                        heapq.heappushpop(newest, item)
            finally:
                os.close(top)
        found_sorted = sorted(newest, key=lambda f: (-f[0], f[1]))
        names = [name for _, name in found_sorted]
        if not names:
            text = f"No files match {args['pattern']!r}."
        else:
            text = "\n".join(names)
            if count > MAX_FILES:
                text += (
                    f"\n[{count:,} files match; showing the {MAX_FILES} newest. "
                    "Narrow the pattern or give a `path`.]"
                )
        text = "\n".join([text, *walked.notes()])
        return {
            "text": text,
            "count": count,
            "shown": len(names),
            "protected_skipped": walked.protected,
            "complete": not walked.stopped,
        }

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None
