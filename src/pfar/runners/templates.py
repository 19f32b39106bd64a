"""Task templates: TOML files in `$PFAR_HOME/templates/`, one template per file.

See docs/templates.md for the format. A malformed file is refused with the
file and the key named.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..config import validate_model
from ..errors import ConfigError
from ..policy.approvals import ApprovalRule
from ..vault.perms import check_private


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ApprovalSection(_Section):
    require: list[str] = []
    tainted_writes: bool = False
    on_deny: Literal["skip", "fail"] = "fail"
    timeout_seconds: float | None = Field(None, gt=0)


class IdempotencySection(_Section):
    # hosts (host or host:port) whose servers honour Idempotency-Key on POST and PATCH:
    # an interrupted write to them is retried with the same key instead of asking
    trusted_key_hosts: list[str] = []


class TimeoutSection(_Section):
    step_seconds: float = Field(60, gt=0)
    llm_seconds: float = Field(120, gt=0)


TEMPLATE_ID = r"[A-Za-z0-9_.\-]+"


class Template(_Section):
    id: str = Field(pattern=f"^{TEMPLATE_ID}$")
    description: str = ""
    trigger: str = "cli"
    allowed_tools: list[str]
    data_ceiling: Literal["public", "internal", "sensitive", "secret"] = "internal"
    output_sinks: list[str] = ["owner"]
    # when model calls queue at the shared rate limit, higher goes first
    priority: int = Field(0, ge=-100, le=100)
    approval: ApprovalSection = ApprovalSection()
    timeouts: TimeoutSection = TimeoutSection()
    idempotency: IdempotencySection = IdempotencySection()
    # filled by the loader: sha256 of the file, to notice a change under a running task
    content_hash: str = ""

    @field_validator("output_sinks")
    @classmethod
    def _sinks(cls, sinks: list[str]) -> list[str]:
        for sink in sinks:
            if sink != "owner" and not sink.startswith("workspace:"):
                raise ValueError(f"unknown sink {sink!r} (use 'owner' or 'workspace:FILE')")
        return sinks

    @property
    def title(self) -> str:
        return self.description or self.id

    def approval_rule(self) -> ApprovalRule:
        return ApprovalRule(
            require=frozenset(self.approval.require),
            tainted_writes=self.approval.tainted_writes,
            on_deny=self.approval.on_deny,
        )


def load_template(path: Path) -> Template:
    check_private(path)  # a template another user can replace would run their commands
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot be read: {exc}") from None
    if "content_hash" in data:
        raise ConfigError(str(path), "content_hash", "is computed by pfar; remove it")
    tpl = validate_model(Template, data, path)
    if tpl.id != path.stem:
        raise ConfigError(str(path), "id", f"must match the file name ({path.stem!r})")
    return tpl.model_copy(update={"content_hash": hashlib.sha256(raw).hexdigest()[:16]})


class TemplateRegistry:
    """Templates by id, loaded from a directory; reloaded on demand (e.g. each submit)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._templates: dict[str, Template] = {}
        self._stamps: dict[str, tuple[int, int, int]] = {}

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
                    tpl = load_template(path)
                except ConfigError as exc:
                    errors.append(exc)
                    continue
                found[tpl.id] = tpl
                st = path.stat()
                self._stamps[tpl.id] = (st.st_mtime_ns, st.st_size, st.st_ino)
        self._templates = found
        return errors

    def get(self, template_id: str) -> Template | None:
        return self._templates.get(template_id)

    def fresh(self, template_id: str) -> Template | None:
        """The template as it is on disk now: what a resumed task is checked against.

        Re-read only when the file's size or modification time changed.
        """
        if not re.fullmatch(TEMPLATE_ID, template_id):  # it names a file: no ../config
            raise ConfigError(str(self.directory), "", f"{template_id!r} is not a template id")
        path = self.directory / f"{template_id}.toml"
        try:
            st = path.stat()
        except FileNotFoundError:
            self._templates.pop(template_id, None)
            self._stamps.pop(template_id, None)
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._templates.get(template_id)
        if cached is not None and self._stamps.get(template_id) == stamp:
            return cached
        tpl = load_template(path)
        self._templates[template_id] = tpl
        self._stamps[template_id] = stamp
        return tpl

    def ids(self) -> list[str]:
        return sorted(self._templates)
