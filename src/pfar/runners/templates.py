"""Task templates: TOML files in `$PFAR_HOME/templates/`, one template per file.

See docs/templates.md for the format. A malformed file is refused with the
file and the key named: every problem in it at once, each with its key. Names
that point elsewhere are checked at load too: tools against the tool registry,
workspace sinks against the task workspace, so that a template that loads runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..config import validate_model
from ..errors import ConfigError
from ..policy.approvals import ApprovalRule
from ..tools.base import SECRET_REF, Credential
from ..vault.perms import check_private
from . import schedules
from .paths import outside_problem


def _known_tool(name: str, info: ValidationInfo) -> str:
    """A tool the registry has: a typo in allowed_tools or approval.require is refused at
    load, not found out when a plan asks for it (or when an approval silently never asks)."""
    known = (info.context or {}).get("tools")
    if known is not None and name not in known and not (name == "*" and _is_require(info)):
        raise ValueError(f"unknown tool {name!r} (known: {', '.join(sorted(known))})")
    return name


def _is_require(info: ValidationInfo) -> bool:
    return info.field_name == "require"  # approval.require = ["*"]: every write


def _sink(sink: str) -> str:
    if sink == "owner":
        return sink
    if not sink.startswith("workspace:"):
        raise ValueError(f"unknown sink {sink!r} (use 'owner' or 'workspace:FILE')")
    problem = outside_problem(sink.removeprefix("workspace:"), "the task workspace")
    if problem:
        raise ValueError(f"{sink!r}: {problem}")
    return sink


ToolName = Annotated[str, AfterValidator(_known_tool)]
Sink = Annotated[str, AfterValidator(_sink)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ApprovalSection(_Section):
    require: list[ToolName] = []
    tainted_writes: bool = False
    on_deny: Literal["skip", "fail"] = "fail"
    timeout_seconds: float | None = Field(None, gt=0)


class IdempotencySection(_Section):
    # hosts (host or host:port) whose servers honour Idempotency-Key on POST and PATCH:
    # an interrupted write to them is retried with the same key instead of asking
    trusted_key_hosts: list[str] = []


class ScheduleSection(_Section):
    """`[schedule]`: how a template with `trigger = "cron:EXPR"` runs on its own."""

    # the schedule's time zone (an IANA name): "0 8 * * *" is 08:00 there, DST included
    timezone: str = "UTC"
    # missed slots after downtime: "none", "latest" (one task for the newest), or "all"
    # (a task for each within [recovery] max_task_age_seconds)
    catch_up: Literal["none", "latest", "all"] = "latest"
    # the text each scheduled task is given
    input: str = Field("", max_length=100_000)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not a time zone name (e.g. 'Europe/Berlin')") from None
        return value


class TimeoutSection(_Section):
    step_seconds: float = Field(60, gt=0)
    llm_seconds: float = Field(120, gt=0)


class CredentialSection(_Section):
    """`[[credentials]]`: where the template's author lets a secret go, and nowhere else.

    http.request: `host` and `headers`; the headers are set on requests to that
    host only. shell.run: `env` and/or `stdin`, never the command line.
    """

    tool: Literal["http.request", "shell.run"]
    host: str | None = Field(None, pattern=r"^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$")
    headers: dict[str, str] = {}
    env: dict[str, str] = {}
    stdin: str | None = None

    @model_validator(mode="after")
    def _fits_its_tool(self) -> CredentialSection:
        if self.tool == "http.request":
            if self.host is None:
                raise ValueError("an http.request credential needs `host`: the one host it goes to")
            if not self.headers or self.env or self.stdin is not None:
                raise ValueError("an http.request credential sets `headers` (not env or stdin)")
        else:
            if self.host is not None or self.headers:
                raise ValueError(
                    "a shell.run credential sets `env` or `stdin` (not host or headers)"
                )
            if not self.env and self.stdin is None:
                raise ValueError("a shell.run credential sets `env` or `stdin`")
        texts = [*self.headers.values(), *self.env.values(), self.stdin or ""]
        if not any(SECRET_REF.search(t) for t in texts):
            raise ValueError("names no secret: write it as {{secret:NAME}}")
        return self

    def binding(self) -> Credential:
        return Credential(
            tool=self.tool,
            host=self.host,
            headers=tuple(self.headers.items()),
            env=tuple(self.env.items()),
            stdin=self.stdin,
        )


TEMPLATE_ID = r"[A-Za-z0-9_.\-]+"


class Template(_Section):
    id: str = Field(pattern=f"^{TEMPLATE_ID}$")
    description: str = ""
    # "cli" (the default: started by the owner), or "cron:EXPR" (its [schedule])
    trigger: str = "cli"
    allowed_tools: list[ToolName]
    data_ceiling: Literal["public", "internal", "sensitive", "secret"] = "internal"
    output_sinks: list[Sink] = ["owner"]
    # when model calls queue at the shared rate limit, higher goes first
    priority: int = Field(0, ge=-100, le=100)
    approval: ApprovalSection = ApprovalSection()
    timeouts: TimeoutSection = TimeoutSection()
    idempotency: IdempotencySection = IdempotencySection()
    credentials: list[CredentialSection] = []
    schedule: ScheduleSection = ScheduleSection()
    # filled by the loader: sha256 of the file, to notice a change under a running task
    content_hash: str = ""

    @field_validator("id")
    @classmethod
    def _file_name(cls, value: str, info: ValidationInfo) -> str:
        stem = (info.context or {}).get("file_stem")
        if stem is not None and value != stem:
            raise ValueError(f"must match the file name ({stem!r})")
        return value

    @field_validator("trigger")
    @classmethod
    def _cron_parses(cls, value: str) -> str:
        expr = schedules.expression(value)
        if expr is not None and not schedules.valid(expr):
            raise ValueError(
                f"{expr!r} is not a cron expression (five fields: minute hour day month "
                "weekday, e.g. 'cron:0 8 * * 1-5')"
            )
        return value

    @property
    def cron(self) -> str | None:
        """The cron expression of a scheduled template, else None."""
        return schedules.expression(self.trigger)

    @field_validator("content_hash")
    @classmethod
    def _computed(cls, value: str, info: ValidationInfo) -> str:
        # runs only when the file sets it: the loader fills it in
        if (info.context or {}).get("file_stem") is not None:
            raise ValueError("is computed by pfar; remove it")
        return value

    @model_validator(mode="after")
    def _credentials_for_allowed_tools(self) -> Template:
        for i, cred in enumerate(self.credentials):
            if cred.tool not in self.allowed_tools:
                raise ValueError(
                    f"credentials[{i}] is for {cred.tool}, which allowed_tools does not list"
                )
        return self

    def bindings(self, tool: str) -> tuple[Credential, ...]:
        return tuple(c.binding() for c in self.credentials if c.tool == tool)

    @property
    def title(self) -> str:
        return self.description or self.id

    def approval_rule(self) -> ApprovalRule:
        return ApprovalRule(
            require=frozenset(self.approval.require),
            tainted_writes=self.approval.tainted_writes,
            on_deny=self.approval.on_deny,
        )


def load_template(path: Path, tools: Collection[str]) -> Template:
    check_private(path)  # a template another user can replace would run their commands
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot be read: {exc}") from None
    tpl = validate_model(
        Template, data, path, context={"file_stem": path.stem, "tools": frozenset(tools)}
    )
    return tpl.model_copy(update={"content_hash": hashlib.sha256(raw).hexdigest()[:16]})


class TemplateRegistry:
    """Templates by id, loaded from a directory; reloaded on demand (e.g. each submit).

    `tools` are the names of the registered tools: a template naming another is refused.
    """

    def __init__(self, directory: Path, tools: Collection[str]) -> None:
        self.directory = directory
        self._tools = frozenset(tools)
        self._templates: dict[str, Template] = {}
        self._stamps: dict[str, tuple[int, ...]] = {}

    def load(self) -> list[ConfigError]:
        """Load every template; return the errors of files that could not be loaded."""
        found: dict[str, Template] = {}
        errors: list[ConfigError] = []
        if self.directory.exists():
            try:
                check_private(self.directory)
            except ConfigError as exc:
                self._templates = {}
                return [exc]
            for path in sorted(self.directory.glob("*.toml")):
                try:
                    # stamped before it is read: a change meanwhile is read at its next use
                    stamp = _stamp(os.stat(path))
                    tpl = load_template(path, self._tools)
                except OSError as exc:  # a dangling link, a file gone since the listing
                    errors.append(ConfigError(str(path), "", f"cannot be read: {exc}"))
                    continue
                except ConfigError as exc:
                    errors.append(exc)
                    continue
                found[tpl.id] = tpl
                self._stamps[tpl.id] = stamp
        self._templates = found
        return errors

    def get(self, template_id: str) -> Template | None:
        return self._templates.get(template_id)

    def fresh(self, template_id: str) -> Template | None:
        """The template as it is on disk now: what a resumed task is checked against.

        Re-read, and its permissions (and its directories') checked, when the file
        changed: its size, modification time, inode, or its change time, which a chmod,
        a chown and a rename onto it move too. What was checked when it was read is what
        runs: a directory loosened later is refused when the file in it next changes.
        """
        if not re.fullmatch(TEMPLATE_ID, template_id):  # it names a file: no ../config
            raise ConfigError(str(self.directory), "", f"{template_id!r} is not a template id")
        path = self.directory / f"{template_id}.toml"
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._templates.pop(template_id, None)
            self._stamps.pop(template_id, None)
            return None
        stamp = _stamp(st)
        cached = self._templates.get(template_id)
        if cached is not None and self._stamps.get(template_id) == stamp:
            return cached
        self._stamps.pop(template_id, None)  # checked again at its next use, whatever now
        tpl = load_template(path, self._tools)  # which refuses it when others can write it
        self._templates[template_id] = tpl
        self._stamps[template_id] = stamp
        return tpl

    def ids(self) -> list[str]:
        return sorted(self._templates)


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    """What changes when a template file's content or permissions change: its mode and
    owner too, since a change time can stay the same across a chmod within a clock tick."""
    return (
        st.st_mtime_ns,
        st.st_size,
        st.st_ino,
        st.st_ctime_ns,
        st.st_mode,
        st.st_uid,
        st.st_gid,
    )
