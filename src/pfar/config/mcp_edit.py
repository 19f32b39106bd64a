"""`pfar mcp add` and `pfar mcp remove`: one `[[mcp.servers]]` entry written into or
taken out of config.toml, and nothing else of the file touched.

An added entry is appended to the file's text; a removed one is cut out of it where
tomlkit found it, the comments and blank lines after its last key (which belong to what
follows: tomlkit reads them as the entry's) kept in its place. Every other byte stays
as the owner wrote it. The whole new file is validated as `pfar run` reads it before it
replaces the old one, atomically, under a lock on the file's folder; a file changed by
someone else meanwhile is not overwritten. A symbolic link is followed: its target is
edited and the link kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.items import AoT

from ..errors import ConfigError
from ..vault.durable import write_text
from ..vault.perms import check_private
from .mcp import McpServerConfig
from .root import Config
from .validation import validate_model

WHERE = "mcp.servers"
HEADER = "[[mcp.servers]]\n"


def add_server(path: Path, entry: dict[str, Any]) -> McpServerConfig:
    """Append `entry` (the keys of one `[[mcp.servers]]`) to config.toml at `path`."""
    name = str(entry.get("name", ""))
    with _editing(path) as (real, text):
        if any(s.name.lower() == name.lower() for s in _config(real, text).mcp.servers):
            raise ConfigError(
                str(path),
                WHERE,
                f"a server named {name!r} is there already: `pfar mcp remove {name}` "
                "first, or edit its entry",
            )
        table = tomlkit.table()
        for key, value in entry.items():
            table.add(key, _inline(value))
        before = text if not text or text.endswith("\n") else text + "\n"
        added = before + ("\n" if before.strip() else "") + HEADER + table.as_string()
        try:
            config = _config(real, added)
        except ConfigError as exc:
            if exc.key:  # a key of the new entry: the owner's to fix in the command
                raise
            raise ConfigError(
                str(path),
                WHERE,
                f"an [[mcp.servers]] entry cannot be added to this file ({exc.problem}): "
                "edit it by hand",
            ) from None
        _replace(real, text, added)
    return next(s for s in config.mcp.servers if s.name.lower() == name.lower())


def remove_server(path: Path, name: str) -> str:
    """Take the `[[mcp.servers]]` entry named `name` (case as pfar compares names:
    ignored) out of config.toml at `path`; the name as the entry had it."""
    with _editing(path) as (real, text):
        config = _config(real, text)
        named = [s.name for s in config.mcp.servers if s.name.lower() == name.lower()]
        if not named:
            raise ConfigError(str(path), WHERE, f"no server is named {name!r}; nothing was changed")
        mcp = tomlkit.parse(text).get("mcp")
        # a table, or tomlkit's proxy of one whose parts lie apart in the file
        servers = mcp.get("servers") if isinstance(mcp, Mapping) else None
        body = next(
            (
                t.as_string()
                for t in (servers if isinstance(servers, AoT) else ())
                if str(t.get("name", "")).lower() == name.lower()
            ),
            None,
        )
        whole = HEADER + body if body is not None else None
        if whole is None or text.count(whole) != 1:
            raise ConfigError(
                str(path),
                WHERE,
                f"server {named[0]!r} is not written as an [[mcp.servers]] table pfar can "
                "take out on its own: edit config.toml by hand; nothing was changed",
            )
        at = text.index(whole)
        before, after = text[:at], _trailing_trivia(whole) + text[at + len(whole) :]
        if not before:
            after = after.lstrip("\n")
        elif before.endswith("\n\n"):  # one blank line between what was around it
            after = after.lstrip("\n")
            before = before if after else before[:-1]
        removed = before + after
        left = _config(real, removed).mcp.servers
        if any(s.name.lower() == name.lower() for s in left):  # cut the wrong text: refuse
            raise ConfigError(str(path), WHERE, f"could not take {name!r} out: edit by hand")
        _replace(real, text, removed)
    return named[0]


@contextlib.contextmanager
def _editing(path: Path) -> Iterator[tuple[Path, str]]:
    """The real file (a link's target) and its text, under a lock on its folder: two
    edits at once are one after the other."""
    real = path.resolve() if path.is_symlink() else path
    if not real.parent.is_dir():
        raise ConfigError(
            str(path), "", f"there is no folder {real.parent} (`pfar init` makes a home)"
        )
    check_private(path)  # as `pfar run` reads it: a file others may write is refused
    check_private(real)
    fd = os.open(real.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield real, _read(path, real)
    finally:
        os.close(fd)  # and the lock with it


def _read(path: Path, real: Path) -> str:
    if not real.exists():
        return ""
    try:
        return real.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot be read: {exc}") from None


def _config(path: Path, text: str) -> Config:
    """`text` validated as `pfar run` would read it from `path`."""
    try:
        tomlkit.parse(text)  # what tomllib takes, tomlkit must too: it finds the entries
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ParseError) as exc:
        raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None
    return validate_model(Config, data, path)


def _replace(real: Path, read: str, text: str) -> None:
    """Put `text` in place of the file, unless it changed since it was `read` (an
    editor saved it, or a program that does not take the lock wrote it)."""
    if _read(real, real) != read:
        raise ConfigError(
            str(real),
            "",
            "it changed while it was being edited; nothing was written: run the command again",
        )
    write_text(real, text)


def _trailing_trivia(entry: str) -> str:
    """The comments and blank lines after an entry's last key: the next table's."""
    lines = entry.splitlines(keepends=True)
    cut = len(lines)
    while cut and (not lines[cut - 1].strip() or lines[cut - 1].lstrip().startswith("#")):
        cut -= 1
    return "".join(lines[cut:])


def _inline(value: Any) -> Any:
    """A table value (env, headers) written inline, as docs/mcp.md shows it."""
    if isinstance(value, dict):
        inline = tomlkit.inline_table()
        inline.update(value)
        return inline
    return value
