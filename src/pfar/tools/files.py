"""file.read and file.write, confined to the task's workspace."""

from __future__ import annotations

import hashlib
import os
from typing import Any, ClassVar

from ..journal.records import Idempotency, Semantics
from .base import ToolContext, check_args, inside

_MAX_READ = 1 << 20
_PATH = {
    "type": "string",
    "minLength": 1,
    "description": "a relative path inside the task workspace",
}


class FileRead:
    name: ClassVar[str] = "file.read"
    description: ClassVar[str] = "Read a text file from the task workspace."
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"path": _PATH},
        "required": ["path"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Read

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        path = inside(ctx.workspace, args["path"], self.name)
        data = path.read_bytes()[:_MAX_READ]
        return {"path": args["path"], "content": data.decode("utf-8", errors="replace")}

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None


class FileWrite:
    """Writes atomically (temp file, fsync, rename); a retry can see its own effect."""

    name: ClassVar[str] = "file.write"
    description: ClassVar[str] = "Write a text file in the task workspace (atomic replace)."
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "the file's whole new text"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Write

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        path = inside(ctx.workspace, args["path"], self.name)
        data = str(args["content"]).encode("utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{ctx.idempotency_key.replace(':', '_')}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return {
            "path": args["path"],
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        path = inside(ctx.workspace, args["path"], self.name)
        data = str(args["content"]).encode("utf-8")
        if path.exists() and path.read_bytes() == data:
            digest = hashlib.sha256(data).hexdigest()
            return {"path": args["path"], "bytes": len(data), "sha256": digest}
        return None
