"""`[[mcp.servers]]`: the MCP servers whose tools a loop task may call (docs/mcp.md).

A server is a program pfar starts (`command`, spoken to over its stdin and stdout) or
one that already listens (`url`, streamable HTTP). Its secrets are written as
`{{secret:NAME}}` in `env` (a command's) or `headers` (a URL's) and filled in from the
vault when the server starts: never on a command line, never in the journal.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from .section import DAY, Section

# a server's name is part of its tools' names (`mcp__<name>__<tool>`), which the
# providers' APIs limit to letters, digits, `_` and `-`; no `__`, which separates them
SERVER_NAME = r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$"
SERVER_NAME_LENGTH = 24
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class McpToolConfig(Section):
    """`[mcp.servers.tools.NAME]`: the owner's word on one tool, over its annotations."""

    # "read": run again after a crash; "idempotent": a write run again with the same
    # arguments; "write": a call cut off by a crash is asked about
    semantics: Literal["read", "idempotent", "write"] | None = None
    # true: the owner is asked before every call (a standing "always" does not cover
    # it); false: it runs without a question (as `[loop] always_allow`)
    ask: bool | None = None


class McpServerConfig(Section):
    """One `[[mcp.servers]]` entry."""

    name: str = Field(pattern=SERVER_NAME, max_length=SERVER_NAME_LENGTH)
    enabled: bool = True
    # stdio: the program and its arguments (no secrets here: argv is visible to others)
    command: list[str] | None = Field(None, min_length=1)
    # its working directory (default: a directory of its own under the home's mcp/)
    cwd: str | None = None
    # its environment besides PATH, HOME, LANG ...: values may hold `{{secret:NAME}}`
    env: dict[str, str] = {}
    # streamable HTTP: the server's address, and headers sent with every request
    url: str | None = None
    headers: dict[str, str] = {}
    # how long its start (and the listing of its tools) may take
    start_timeout_seconds: float = Field(30, gt=0, le=DAY)
    tools: dict[str, McpToolConfig] = {}

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"server {self.name!r}: give exactly one of command or url")
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"server {self.name!r}: url must be an http:// or https:// URL")
            if self.env or self.cwd is not None:
                raise ValueError(f"server {self.name!r}: env and cwd are for a command")
        if self.command is not None:
            if not self.command[0].strip():
                raise ValueError(f"server {self.name!r}: command's program is empty")
            if self.headers:
                raise ValueError(f"server {self.name!r}: headers are for a url")
        for key in self.env:
            if not _ENV_NAME.match(key):
                raise ValueError(f"server {self.name!r}: env name {key!r} is not a variable name")
        for key in self.headers:
            if not _HEADER_NAME.match(key):
                raise ValueError(f"server {self.name!r}: header name {key!r} is not valid")
        return self


class McpConfig(Section):
    """`[mcp]`: the servers; every tool of an enabled one is offered to loop tasks."""

    servers: list[McpServerConfig] = []

    @model_validator(mode="after")
    def _unique(self) -> McpConfig:
        seen: set[str] = set()
        for server in self.servers:
            if server.name.lower() in seen:
                raise ValueError(f"two servers are named {server.name!r}")
            seen.add(server.name.lower())
        return self
