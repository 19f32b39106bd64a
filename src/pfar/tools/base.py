"""What a tool is: its Read/Write semantics, how it is idempotent, and how it runs."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol
from urllib.parse import urlsplit

from ..errors import ToolFailed
from ..journal.records import Idempotency, Semantics
from ..journal.turns import SkillSeen
from ..json_schema import validate_schema
from .hosts import HostPolicy
from .sandbox import Sandbox

if TYPE_CHECKING:
    from .protected import Protection

SECRET_REF = re.compile(r"\{\{\s*secret:([A-Za-z0-9_.\-]+)\s*\}\}")


@dataclass(frozen=True, slots=True)
class Credential:
    """Secret-bearing arguments that a template's author bound to one tool.

    This is the only place a `{{secret:NAME}}` reference is expanded. A plan's
    arguments come from a model that may have read hostile text (the task's
    input, a web page, a command's output), so they are data: a reference
    written there reaches the tool as the literal text it is.
    """

    tool: str
    host: str | None = None  # http.request: the only host (host or host:port) it is sent to
    headers: tuple[tuple[str, str], ...] = ()  # http.request: headers it sets
    env: tuple[tuple[str, str], ...] = ()  # shell.run: environment variables it sets
    stdin: str | None = None  # shell.run: text written to the command's stdin

    def secret_names(self) -> list[str]:
        texts = [v for _, v in self.headers] + [v for _, v in self.env] + [self.stdin or ""]
        return sorted({m.group(1) for t in texts for m in SECRET_REF.finditer(t)})

    def fits_url(self, url: str) -> bool:
        """An http.request binding fits a URL on its own host, over http or https."""
        parts = urlsplit(url)
        if self.host is None or parts.scheme not in ("http", "https"):
            return False
        host = self.host.lower()
        if ":" in host:
            return parts.netloc.lower().rsplit("@", 1)[-1] == host
        return (parts.hostname or "").lower() == host


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool call may use. `idempotency_key` is stable across retries of one step."""

    task_id: str
    step: int
    idempotency_key: str
    workspace: Path
    secret: Callable[[str], str | None]
    # journals a process the tool started (see tools/processes.py), before it is waited on
    started_process: Callable[[int], Awaitable[None]] | None = None
    # what the template's author bound to this tool (see Credential)
    credentials: tuple[Credential, ...] = ()
    # where a command runs confined ([sandbox] enabled): tools that start processes wrap
    # their argv with it
    sandbox: Sandbox | None = None
    # a small model's answer to a prompt about a text (content, prompt -> answer), for
    # tools that read long outside text (WebFetch); None: the tool returns the text itself
    summarize: Callable[[str, str], Awaitable[str]] | None = None
    # paths the file tools refuse and leave out of listings (see protected.py); None:
    # none (a template's steps, which work in their own workspace)
    protection: Protection | None = None
    # where a URL may go (the loop's [loop.policy]); None: WebFetch reaches public
    # addresses only, and http.request goes where its template sends it
    hosts: HostPolicy | None = None
    # the runner's word on a redirect to a new host (its standing answers and unusual
    # hosts): raises ToolFailed saying why the redirect is not followed
    redirected: Callable[[str], Awaitable[None]] | None = None
    # the skills the task was given (a loop task's settings): what the Skill tool serves
    skills: tuple[SkillSeen, ...] = ()

    def expand(self, text: str) -> str:
        """`text` from a Credential with its `{{secret:NAME}}` references filled in, at
        call time only: the journal keeps the reference, never the value."""

        def sub(m: re.Match[str]) -> str:
            found = self.secret(m.group(1))
            if found is None:
                raise ToolFailed(
                    f"secret {m.group(1)!r} is not in the vault; "
                    f"set it with `pfar credential` when asked, or `pfar secret set`"
                )
            return found

        return SECRET_REF.sub(sub, text)


@dataclass(frozen=True, slots=True, order=True)
class Resource:
    """What a call touches that another task's call may touch too (seed 001, 4.3): a file
    (shared for reads, exclusive for writes), a git repository (exclusive), a host (a
    rate slot), an MCP server (shared for its reads, exclusive for its other tools).
    Locks on them are taken in sorted order, so none deadlocks."""

    kind: Literal["file", "repo", "host", "mcp"]
    name: str  # an absolute path, a host name, or an MCP server's name
    mode: Literal["shared", "exclusive"] = "shared"


def resources_of(tool: Any, args: dict[str, Any], workspace: Path) -> tuple[Resource, ...]:
    """The resources a call declares, sorted (a tool that declares none touches none that
    needs a lock)."""
    declare = getattr(tool, "resources", None)
    if declare is None:
        return ()
    try:
        found = declare(args, workspace)
    except (ToolFailed, ValueError, TypeError, OSError):
        return ()  # bad arguments: the tool refuses them when it runs
    return tuple(sorted(set(found)))


def file_resource(
    workspace: Path, value: object, mode: Literal["shared", "exclusive"]
) -> tuple[Resource, ...]:
    """A file argument as a resource (nothing for an argument that is not a path)."""
    if not isinstance(value, str) or not value:
        return ()
    return (Resource("file", str((workspace / value).resolve()), mode),)


class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    # a JSON Schema for `args`: the planner is shown it, and `validate()` checks it
    args_schema: ClassVar[dict[str, Any]]
    # label of the data the tool returns: "Raw" is untrusted outside data (taints later writes)
    result_label: ClassVar[str]

    def semantics(self, args: dict[str, Any]) -> Semantics: ...

    def idempotency(self, args: dict[str, Any]) -> Idempotency: ...

    def validate(self, args: dict[str, Any]) -> None:
        """Raise ToolFailed naming the bad argument (`check_args` first, then any rule
        a schema cannot say)."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any: ...

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        """For `Idempotency.check` tools: the result if the effect already exists, else None."""

    # optional: `resources(args, workspace) -> Sequence[Resource]`, what the call touches
    # that needs a lock (see resources_of); a tool without it declares none


def check_args(tool: str, schema: dict[str, Any], args: dict[str, Any]) -> None:
    """Refuse `args` that do not match the tool's `args_schema`, naming every bad argument.

    A plan is checked with this before it is journaled, and its complaint is what the
    planning model is shown in its one corrective turn: it names the argument.
    """
    problems = validate_schema(args, schema, "args")
    if problems:
        raise ToolFailed(f"{tool}: " + "; ".join(problems))


def inside(workspace: Path, relative: str, tool: str) -> Path:
    """A path inside the task's workspace; anything escaping it is refused."""
    target = (workspace / relative).resolve()
    root = workspace.resolve()
    if target != root and root not in target.parents:
        raise ToolFailed(f"{tool}: path {relative!r} is outside the task workspace")
    return target
