"""Read: a text file with numbered lines, a window of it at a time."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar, Final

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import Resource, ToolContext, check_args, file_resource
from .paths import existing_file, shown
from .text import MAX_CHARS, looks_binary

DEFAULT_LIMIT: Final = 2000
# a line longer than this is cut (minified code would otherwise fill the window alone)
MAX_LINE: Final = 2000


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
        path = existing_file(ctx, args["file_path"], self.name)
        offset = int(args.get("offset", 1))
        limit = int(args.get("limit", DEFAULT_LIMIT))
        digest = hashlib.sha256()
        out: list[str] = []
        size = 0
        total = 0
        last_shown = offset - 1
        capped = False
        with path.open("rb") as f:
            head = f.read(8192)
            if looks_binary(head):
                raise ToolFailed(
                    f"{self.name}: {args['file_path']} is a binary file, not text; "
                    "inspect it with Bash (e.g. `file`, `xxd | head`)"
                )
            f.seek(0)
            for total, raw in enumerate(f, start=1):
                digest.update(raw)
                if total < offset or total >= offset + limit or capped:
                    continue
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if len(line) > MAX_LINE:
                    line = line[:MAX_LINE] + f" [... line cut at {MAX_LINE} characters]"
                entry = f"{total:>6}\t{line}\n"
                if size + len(entry) > MAX_CHARS and out:
                    capped = True
                    continue
                out.append(entry)
                size += len(entry)
                last_shown = total
        name = shown(ctx, path)
        if total == 0:
            text = f"({name} is empty)"
        elif offset > total:
            raise ToolFailed(
                f"{self.name}: {args['file_path']} has {total} lines; offset {offset} is past "
                "its end"
            )
        else:
            text = "".join(out)
            if last_shown < total:
                why = (
                    f"capped at {MAX_CHARS:,} characters"
                    if capped
                    else f"limit {limit} lines reached"
                )
                text += (
                    f"\n[Showed lines {offset}-{last_shown} of {total} ({why}). "
                    f"Read on with offset={last_shown + 1}.]"
                )
        return {
            "text": text,
            "file_path": name,
            "first_line": offset,
            "last_line": last_shown,
            "total_lines": total,
            "sha256": digest.hexdigest(),
        }

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None
