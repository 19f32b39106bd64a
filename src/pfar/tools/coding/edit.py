"""Edit: replace an exact piece of a file's text, found exactly once (or every time)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, ClassVar, Final

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import Resource, ToolContext, check_args, file_resource
from .atomic import sha256, write_atomic
from .beneath import Located, open_file
from .paths import place
from .text import looks_binary

# lines of context shown around the change, and the most lines shown at all
_AROUND: Final = 3
_MAX_SNIPPET: Final = 40
# the biggest file Edit reads (it holds the file twice while it replaces)
MAX_BYTES: Final = 16 << 20


class Edit:
    """Atomic like Write. After a crash, `check` reads the file: the edit took effect
    when its old text is gone and its new text is there; it did not when the old text
    is still there. When the new text contains the old one the file cannot tell, so
    such an edit declares no idempotency and a crash puts it to the owner."""

    name: ClassVar[str] = "Edit"
    description: ClassVar[str] = (
        "Edit a text file in the working directory by exact string replacement: "
        "old_string (copied exactly from the file, indentation included, without Read's "
        "line-number prefix) is replaced by new_string. old_string must occur exactly "
        "once: if it is not found, or found several times, nothing changes and the error "
        "says so; give more surrounding lines to make it unique, or set replace_all to "
        "change every occurrence (e.g. to rename). The write is atomic. Returns how many "
        "occurrences were replaced and the changed lines, numbered."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "minLength": 1,
                "description": "the file to edit (relative, or absolute inside the directory)",
            },
            "old_string": {
                "type": "string",
                "minLength": 1,
                "description": "the exact text to replace",
            },
            "new_string": {
                "type": "string",
                "description": "the text to put in its place (different from old_string)",
            },
            "replace_all": {
                "type": "boolean",
                "description": "replace every occurrence instead of exactly one (default false)",
            },
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def resources(self, args: dict[str, Any], workspace: Path) -> tuple[Resource, ...]:
        return file_resource(workspace, args.get("file_path"), "exclusive")

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Write

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        if str(args.get("old_string", "")) in str(args.get("new_string", "")):
            return Idempotency.none  # done or not, the old text is still in the file
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)
        if args["old_string"] == args["new_string"]:
            raise ToolFailed(
                f"{self.name}: old_string and new_string are the same; nothing would change"
            )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return await asyncio.to_thread(self._edit, args, ctx)

    def _edit(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        with place(ctx, str(args["file_path"]), self.name, writing=True) as at:
            return self._edit_at(at, args, ctx)

    def _edit_at(self, at: Located, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        text = self._text(at, args)
        old, new = str(args["old_string"]), str(args["new_string"])
        replace_all = bool(args.get("replace_all", False))
        found = text.count(old)
        if found == 0:
            raise ToolFailed(
                f"{self.name}: old_string was not found in {args['file_path']}; nothing "
                "changed. Read the file and copy the text exactly (whitespace and "
                "indentation included, no line-number prefix)."
            )
        if found > 1 and not replace_all:
            raise ToolFailed(
                f"{self.name}: old_string was found {found} times in {args['file_path']}; "
                "nothing changed. Give more context (surrounding lines) so it occurs "
                "once, or set replace_all to replace every occurrence."
            )
        first = text.index(old)
        changed = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        data = changed.encode("utf-8")
        try:
            write_atomic(at.parent, at.name, data, ctx.idempotency_key)
        except OSError as exc:
            raise ToolFailed(
                f"{self.name}: cannot write {args['file_path']}: {exc.strerror}"
            ) from None
        name = at.relative
        what = f"{found} occurrences" if found > 1 else "1 occurrence"
        text_out = f"Edited {name}: replaced {what}.\n" + _snippet(changed, first, new)
        return {
            "text": text_out,
            "file_path": name,
            "replacements": found,
            "sha256": sha256(data),
        }

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return await asyncio.to_thread(self._check, args, ctx)

    def _check(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any] | None:
        try:
            with place(ctx, str(args["file_path"]), self.name) as at:
                text = self._text(at, args)
                name = at.relative
        except ToolFailed:
            return None  # gone or unreadable: running it again says why
        old, new = str(args["old_string"]), str(args["new_string"])
        if old in text or new not in text:
            return None
        return {
            "text": f"Edited {name}: the change is in place.",
            "file_path": name,
            "replacements": text.count(new) if new else 0,
            "sha256": sha256(text.encode("utf-8")),
        }

    def _text(self, at: Located, args: dict[str, Any]) -> str:
        fd = open_file(at, self.name, str(args["file_path"]))
        with os.fdopen(fd, "rb", buffering=0) as f:
            data = f.read(MAX_BYTES + 1)  # never more than Edit takes, however big the file
        if len(data) > MAX_BYTES:
            raise ToolFailed(
                f"{self.name}: {args['file_path']} is over {MAX_BYTES >> 20} MB, more than "
                "Edit takes; change it with Bash (e.g. sed) instead"
            )
        if looks_binary(data[:8192]):
            raise ToolFailed(f"{self.name}: {args['file_path']} is a binary file, not text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailed(
                f"{self.name}: {args['file_path']} is not UTF-8 text; Edit would corrupt it "
                "(change it with Bash instead)"
            ) from None


def _snippet(text: str, at: int, new: str) -> str:
    """The lines around the first replacement, numbered like Read shows them."""
    lines = text.splitlines()
    start = text.count("\n", 0, at)
    end = start + new.count("\n")
    lo, hi = max(0, start - _AROUND), min(len(lines), end + _AROUND + 1)
    hi = min(hi, lo + _MAX_SNIPPET)
    return "".join(f"{n + 1:>6}\t{lines[n]}\n" for n in range(lo, hi))
