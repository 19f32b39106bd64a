"""Write: a file's whole content, replaced atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import Resource, ToolContext, check_args, file_resource
from .atomic import sha256, write_atomic
from .paths import resolve, shown


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
        path = resolve(ctx, args["file_path"], self.name)
        if path.is_dir():
            raise ToolFailed(f"{self.name}: {args['file_path']} is a directory")
        data = str(args["content"]).encode("utf-8")
        existed = path.exists()
        try:
            write_atomic(path, data, ctx.idempotency_key)
        except OSError as exc:
            raise ToolFailed(
                f"{self.name}: cannot write {args['file_path']}: {exc.strerror}"
            ) from None
        return self._result(ctx, path, data, "Updated" if existed else "Created")

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        path = resolve(ctx, args["file_path"], self.name)
        data = str(args["content"]).encode("utf-8")
        if not path.is_file() or path.stat().st_size != len(data):
            return None
        if sha256(path.read_bytes()) != sha256(data):
            return None
        return self._result(ctx, path, data, "Written")

    def _result(self, ctx: ToolContext, path: Path, data: bytes, verb: str) -> dict[str, Any]:
        name = shown(ctx, path)
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        counted = f"{lines} line" + ("" if lines == 1 else "s")
        return {
            "text": f"{verb} {name} ({len(data):,} bytes, {counted}).",
            "file_path": name,
            "bytes": len(data),
            "sha256": sha256(data),
        }
