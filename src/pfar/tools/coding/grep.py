"""Grep: search file contents by regular expression, with ripgrep when it is installed.

Both searches give the same output, in ripgrep's own shape: `path:line:text` for a
matching line and `path-line-text` for a context line, `--` between separate runs of
lines, files in path order (each directory's entries by name). Both skip `.git` and
binary files (a NUL byte) and search dotfiles. ripgrep also leaves out what a
repository's `.gitignore` ignores; the Python search reads no ignore files.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ..base import ToolContext, check_args
from ..protected import Protection
from .grep_python import search
from .paths import place, protection
from .text import cap_head
from .walk import Walked

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
        "lines. `.git`, binary files, protected paths and files ignored by a "
        "repository's .gitignore are skipped. Results are capped at 30,000 characters, with a note."
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
        where = str(args.get("path", "."))
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
        guard = protection(ctx)
        program = self.backend()
        if program is None:
            # off the event loop: a search over a big tree must not stall other tasks
            found = await asyncio.to_thread(self._python, query, where, ctx)
        else:
            at = await asyncio.to_thread(place, ctx, where, self.name)
            with at:
                root, parts = at.root, at.parts
            found = await _ripgrep(program, query, root, parts, guard, self.name)
        shown = "/".join(found.parts) or "."
        return _result(query, found.lines, args.get("head_limit"), shown, found.walked)

    def _python(self, q: Search, where: str, ctx: ToolContext) -> Searched:
        with place(ctx, where, self.name) as at:
            lines, walked = search(q, at, protection(ctx), self.name)
            return Searched(lines, at.parts, walked)

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None


@dataclass(frozen=True, slots=True)
class Searched:
    """A search's output lines, where it searched, and what its walk left out."""

    lines: list[str]
    parts: tuple[str, ...]
    walked: Walked


# what ripgrep is told to put after a path, so the path can be told from what follows
_SEP: Final = "\x1f"


async def _ripgrep(
    program: str,
    q: Search,
    root: str,
    parts: tuple[str, ...],
    guard: Protection,
    tool: str,
) -> Searched:
    argv = [program, "--no-config", "--color=never", "--sort=path", "--hidden"]
    argv += ["--glob=!.git", "--no-messages"]
    # what the owner's patterns protect is never searched; the rest (pfar's home, the
    # credential folders, absolute patterns) is taken out of the output below
    argv += [f"--glob={g}" for g in guard.rg_excludes()]
    if q.mode == "files_with_matches":
        argv += ["--files-with-matches", "--null"]
    elif q.mode == "count":
        argv += ["--count", "--with-filename", "--null"]
    else:
        argv += ["--with-filename", "-n" if q.line_numbers else "-N"]
        argv += [f"--before-context={q.before}", f"--after-context={q.after}"]
        argv += [f"--field-match-separator={_SEP}:", f"--field-context-separator={_SEP}-"]
    if q.ignore_case:
        argv.append("--ignore-case")
    if q.glob:
        argv.append(f"--glob={q.glob}")
    argv += ["--regexp", q.pattern]
    if parts:
        argv += ["--", "/".join(parts)]
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
    text = bytes(out).decode("utf-8", errors="replace")
    if q.mode == "files_with_matches":
        raw = text.split("\0")
        if raw and raw[-1] == "":
            raw.pop()
    else:
        raw = text.splitlines()
    if more and raw:
        raw = raw[:-1]  # the last one may be cut in the middle
    walked = Walked()
    left_out: set[str] = set()
    lines = []
    for line in raw:
        if line == "--":
            lines.append(line)
            continue
        cut = "\0" if q.mode != "content" else _SEP
        path, _, rest = line.partition(cut)
        if guard.rule(tuple(path.split("/")), os.path.join(root, path)):
            left_out.add(path)
            continue
        if q.mode == "files_with_matches":
            lines.append(path)
        elif q.mode == "count":
            lines.append(f"{path}:{rest}")
        else:
            lines.append(path + rest.replace(_SEP, ""))
    walked.protected = len(left_out)
    return Searched(_tidy(lines), parts, walked)


def _tidy(lines: list[str]) -> list[str]:
    """`--` separators left with nothing between them (their lines were left out)."""
    out: list[str] = []
    for line in lines:
        if line == "--" and (not out or out[-1] == "--"):
            continue
        out.append(line)
    while out and out[-1] == "--":
        out.pop()
    return out


def _result(
    q: Search, lines: list[str], head_limit: int | None, where: str, walked: Walked
) -> dict[str, Any]:
    total = len(lines)
    if head_limit is not None:
        lines = lines[:head_limit]
    notes = walked.notes()
    facts = {"protected_skipped": walked.protected, "complete": not walked.stopped}
    if not lines:
        text = "\n".join([f"No matches for {q.pattern!r} in {where}.", *notes])
        return {"text": text, "lines": 0, **facts}
    body = "\n".join(
        line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [... line cut]" for line in lines
    )
    if len(lines) < total:
        body += f"\n[{total:,} lines of output; showing the first {len(lines):,} (head_limit).]"
    text, _ = cap_head(body, hint="; narrow the search (path, glob) or set head_limit")
    return {"text": "\n".join([text, *notes]), "lines": total, "mode": q.mode, **facts}
