"""`pfar mcp add` and `pfar mcp remove`: one `[[mcp.servers]]` entry written into or
taken out of config.toml, the rest of the file as the owner left it (comments, order,
layout: tomlkit keeps them). The whole new file is validated as `pfar run` would read
it before it replaces the old one, atomically: a refused change leaves the file as it
was, byte for byte."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Table

from ..errors import ConfigError
from ..vault.durable import write_text
from ..vault.perms import check_private
from .mcp import McpServerConfig
from .root import Config
from .validation import validate_model

WHERE = "mcp.servers"


def add_server(path: Path, entry: dict[str, Any]) -> McpServerConfig:
    """Append `entry` (the keys of one `[[mcp.servers]]`) to config.toml at `path`."""
    doc = _read(path)
    mcp = doc.get("mcp")
    if mcp is None:
        mcp = tomlkit.table(is_super_table=True)
        doc.append("mcp", mcp)
    if not isinstance(mcp, Table):
        raise ConfigError(str(path), "mcp", "is not a table: edit config.toml by hand")
    servers = mcp.get("servers")
    if servers is None:
        servers = tomlkit.aot()
        mcp.append("servers", servers)
    if not isinstance(servers, AoT):
        raise ConfigError(
            str(path), WHERE, "is not an array of [[mcp.servers]] tables: edit it by hand"
        )
    name = str(entry.get("name", ""))
    if any(str(s.get("name", "")).lower() == name.lower() for s in servers):
        raise ConfigError(
            str(path),
            WHERE,
            f"a server named {name!r} is there already: `pfar mcp remove "
            f"{name}` first, or edit its entry",
        )
    table = tomlkit.table()
    for key, value in entry.items():
        table.add(key, _inline(value))
    if len(servers):  # a blank line between entries, as docs/mcp.md writes them
        servers[-1].add(tomlkit.nl())
    servers.append(table)
    config = _write_checked(path, doc)
    return next(s for s in config.mcp.servers if s.name.lower() == name.lower())


def remove_server(path: Path, name: str) -> str:
    """Take the `[[mcp.servers]]` entry named `name` (case as pfar compares names:
    ignored) out of config.toml at `path`; the name as the entry had it."""
    doc = _read(path)
    mcp = doc.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, Table) else None
    found = [
        i
        for i, s in enumerate(servers if isinstance(servers, AoT) else ())
        if str(s.get("name", "")).lower() == name.lower()
    ]
    if not found or not isinstance(servers, AoT):
        raise ConfigError(str(path), WHERE, f"no server is named {name!r}; nothing was changed")
    named = str(servers[found[0]]["name"])
    del servers[found[0]]
    if not len(servers) and isinstance(mcp, Table):  # no `mcp.servers = []` left behind
        del mcp["servers"]
        if not len(mcp):
            del doc["mcp"]
    _write_checked(path, doc)
    return named


def _read(path: Path) -> tomlkit.TOMLDocument:
    if not path.exists():
        return tomlkit.document()
    check_private(path)  # as `pfar run` reads it: a file others may write is refused
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot be read: {exc}") from None
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None


def _write_checked(path: Path, doc: tomlkit.TOMLDocument) -> Config:
    """Validate the whole new file (an error names its key), then put it in place."""
    text = tomlkit.dumps(doc)
    config = validate_model(Config, tomllib.loads(text), path)
    write_text(path, text)
    return config


def _inline(value: Any) -> Any:
    """A table value (env, headers) written inline, as docs/mcp.md shows it."""
    if isinstance(value, dict):
        inline = tomlkit.inline_table()
        inline.update(value)
        return inline
    return value
