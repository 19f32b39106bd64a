"""Write: a file's whole content, replaced atomically."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any, ClassVar

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import Resource, ToolContext, check_args, file_resource
from .atomic import sha256, write_atomic
from .beneath import Located, open_file
from .paths import place


class Write:
    """Atomic (temporary file, fsync, rename, directory fsync), so a crash leaves the
    old content or the new. After a crash, `check` finds the write done when the file
    already holds exactly this content (same sha256)."""

    name: ClassVar[str] = "Write"
    description: ClassVar[str] = (
        "Write a file in the working directory: creates it (and any missing parent "
        "directories) or replaces its whole content. The write is atomic: the file holds "
        "either its old content or the new, never part. Returns the path, its size in "
        "bytes and sha256. To change part of an existing file prefer Edit; Read a file "
        "before replacing it."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "minLength": 1,
                "description": "the file to write (relative, or absolute inside the directory)",
            },
            "content": {"type": "string", "description": "the file's whole new content"},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def resources(self, args: dict[str, Any], workspace: Path) -> tuple[Resource, ...]:
        return file_resource(workspace, args.get("file_path"), "exclusive")

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Write

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return await asyncio.to_thread(self._write, args, ctx)

    def _write(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        value = str(args["file_path"])
        data = str(args["content"]).encode("utf-8")
        with place(ctx, value, self.name, make_parents=True, writing=True) as at:
            if not at.name or _is_dir(at):
                raise ToolFailed(f"{self.name}: {value} is a directory")
            try:
                existed = write_atomic(at.parent, at.name, data, ctx.idempotency_key)
            except OSError as exc:
                raise ToolFailed(f"{self.name}: cannot write {value}: {exc.strerror}") from None
            return self._result(at.relative, data, "Updated" if existed else "Created")

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return await asyncio.to_thread(self._check, args, ctx)

    def _check(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any] | None:
        value = str(args["file_path"])
        data = str(args["content"]).encode("utf-8")
        try:
            with place(ctx, value, self.name) as at:
                fd = open_file(at, self.name, value)
                name = at.relative
        except ToolFailed:
            return None  # not there (or not a file): running it again says why
        with os.fdopen(fd, "rb", buffering=0) as f:
            if os.fstat(f.fileno()).st_size != len(data) or f.readall() != data:
                return None
        return self._result(name, data, "Written")

    def _result(self, name: str, data: bytes, verb: str) -> dict[str, Any]:
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        counted = f"{lines} line" + ("" if lines == 1 else "s")
        return {
            "text": f"{verb} {name} ({len(data):,} bytes, {counted}).",
            "file_path": name,
            "bytes": len(data),
            "sha256": sha256(data),
        }


def _is_dir(at: Located) -> bool:
    try:
        return stat.S_ISDIR(os.stat(at.name, dir_fd=at.parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False
