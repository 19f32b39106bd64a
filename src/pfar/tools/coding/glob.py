"""Glob: files whose path matches a pattern, newest first."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import ToolContext, check_args
from .paths import resolve, shown
from .patterns import compile_glob, walk_files

MAX_FILES: Final = 1000


class Glob:
    """A read: after a crash it simply runs again."""

    name: ClassVar[str] = "Glob"
    description: ClassVar[str] = (
        "Find files by name pattern, e.g. `**/*.py` (every .py file at any depth), "
        "`src/**/*.{ts,tsx}`, `*.md` (top level only). `*` matches within one directory "
        "level, `**` across levels, `{a,b}` either. Searches the working directory, or "
        "`path` (a directory inside it); `.git` is skipped. Returns matching file paths "
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
        top = resolve(ctx, str(args.get("path", ".")), self.name)
        if not top.is_dir():
            raise ToolFailed(f"{self.name}: path {args.get('path')} is not a directory")
        matcher = compile_glob(str(args["pattern"]))
        found = []
        for file in walk_files(top):
            if matcher.match(file.relative_to(top).as_posix()):
                try:
                    found.append((file.stat().st_mtime_ns, shown(ctx, file)))
                except OSError:
                    continue  # gone meanwhile
        found.sort(key=lambda f: (-f[0], f[1]))
        names = [name for _, name in found[:MAX_FILES]]
        if not names:
            text = f"No files match {args['pattern']!r}."
        else:
            text = "\n".join(names)
            if len(found) > MAX_FILES:
                text += (
                    f"\n[{len(found):,} files match; showing the {MAX_FILES} newest. "
                    "Narrow the pattern or give a `path`.]"
                )
        return {"text": text, "count": len(found), "shown": len(names)}

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None
