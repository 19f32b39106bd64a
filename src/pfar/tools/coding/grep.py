"""Grep: search file contents by regular expression, with ripgrep when it is installed.

Both searches give the same output, in ripgrep's own shape: `path:line:text` for a
matching line and `path-line-text` for a context line, `--` between separate runs of
lines, files in path order (each directory's entries by name). Both skip `.git` and
binary files (a NUL byte) and search dotfiles. ripgrep also leaves out what a
repository's `.gitignore` ignores; the Python search reads no ignore files.
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import ToolContext, check_args
from .grep_python import search
from .paths import resolve, shown
from .text import cap_head

Mode = Literal["content", "files_with_matches", "count"]
# an output line longer than this is cut (one minified line would fill the result)
MAX_LINE: Final = 1000
# the most of ripgrep's output read before it is stopped
_MAX_RG_BYTES: Final = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Search:
    """One search, as both backends take it."""

    pattern: str
    mode: Mode
    ignore_case: bool
    line_numbers: bool
    before: int
    after: int
    glob: str | None


class Grep:
    """A read: after a crash it simply runs again."""

    name: ClassVar[str] = "Grep"
    description: ClassVar[str] = (
        "Search file contents with a regular expression (ripgrep syntax, e.g. "
        r"`def \w+\(`, `TODO|FIXME`; escape literal braces and parentheses). Searches "
        "the working directory, or `path` (a file or directory inside it); `glob` keeps "
        "only files whose name matches (e.g. `*.py`, `*.{ts,tsx}`, `src/**/*.rs`). "
        "output_mode: `files_with_matches` (default) lists matching files; `count` gives "
        "`path:N` matching lines per file; `content` shows matching lines as "
        "`path:line:text`, with -A/-B/-C lines of context after/before/around shown as "
        "`path-line-text` and `--` between separate runs. -i ignores case; -n shows line "
        "numbers in content mode (default true). head_limit keeps the first N output "
        "lines. `.git`, binary files and files ignored by a repository's .gitignore are "
        "skipped. Results are capped at 30,000 characters, with a note."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "the regular expression to search for",
            },
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "a file or directory to search (default: the working directory)",
            },
            "glob": {
                "type": "string",
                "minLength": 1,
                "description": "only files matching this glob, e.g. `*.py`",
            },
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "description": "what to show (default files_with_matches)",
            },
            "-A": {"type": "integer", "minimum": 0, "description": "lines after each match"},
            "-B": {"type": "integer", "minimum": 0, "description": "lines before each match"},
            "-C": {"type": "integer", "minimum": 0, "description": "lines around each match"},
            "-i": {"type": "boolean", "description": "ignore case"},
            "-n": {"type": "boolean", "description": "line numbers in content mode"},
            "head_limit": {
                "type": "integer",
                "minimum": 1,
                "description": "show only the first N lines of output",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def __init__(self, rg: str | None = "rg") -> None:
        """`rg`: the ripgrep program, used when it is found on PATH; None always uses
        the Python search."""
        self._rg = rg

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Read

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    def backend(self) -> str | None:
        """The ripgrep program this search will run, or None for the Python search."""
        return shutil.which(self._rg) if self._rg else None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        target = resolve(ctx, str(args.get("path", ".")), self.name)
        if not target.exists():
            raise ToolFailed(f"{self.name}: path {args['path']} does not exist")
        around = int(args.get("-C", 0))
        mode: Mode = args.get("output_mode", "files_with_matches")
        query = Search(
            pattern=str(args["pattern"]),
            mode=mode,
            ignore_case=bool(args.get("-i", False)),
            line_numbers=bool(args.get("-n", True)),
            before=int(args.get("-B", around)),
            after=int(args.get("-A", around)),
            glob=args.get("glob"),
        )
        root = ctx.workspace.resolve()
        program = self.backend()
        if program is not None:
            lines = await _ripgrep(program, query, root, target, self.name)
        else:
            lines = await asyncio.to_thread(search, query, root, target, self.name)
        return _result(query, lines, args.get("head_limit"), shown(ctx, target))

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None


async def _ripgrep(program: str, q: Search, root: Path, target: Path, tool: str) -> list[str]:
    argv = [program, "--no-config", "--color=never", "--sort=path", "--hidden"]
    argv += ["--glob=!.git", "--no-messages"]
    if q.mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif q.mode == "count":
        argv += ["--count", "--with-filename"]
    else:
        argv += ["--with-filename", "-n" if q.line_numbers else "-N"]
        argv += [f"--before-context={q.before}", f"--after-context={q.after}"]
    if q.ignore_case:
        argv.append("--ignore-case")
    if q.glob:
        argv.append(f"--glob={q.glob}")
    argv += ["--regexp", q.pattern]
    if target != root:
        argv += ["--", target.relative_to(root).as_posix()]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        out = bytearray()
        while len(out) <= _MAX_RG_BYTES and (chunk := await proc.stdout.read(65536)):
            out += chunk
        more = len(out) > _MAX_RG_BYTES
        if more:
            proc.kill()
            del out[_MAX_RG_BYTES:]
        err = await proc.stderr.read()
        await proc.wait()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if proc.returncode == 2 and not out:
        message = err.decode(errors="replace").strip() or "ripgrep failed"
        raise ToolFailed(f"{tool}: {message}")
    lines = bytes(out).decode("utf-8", errors="replace").splitlines()
    if more:
        lines = lines[:-1]  # the last one may be cut in the middle
    return lines


def _result(q: Search, lines: list[str], head_limit: int | None, where: str) -> dict[str, Any]:
    total = len(lines)
    if head_limit is not None:
        lines = lines[:head_limit]
    if not lines:
        return {"text": f"No matches for {q.pattern!r} in {where}.", "lines": 0}
    body = "\n".join(
        line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [... line cut]" for line in lines
    )
    if len(lines) < total:
        body += f"\n[{total:,} lines of output; showing the first {len(lines):,} (head_limit).]"
    text, _ = cap_head(body, hint="; narrow the search (path, glob) or set head_limit")
    return {"text": text, "lines": total, "mode": q.mode}
