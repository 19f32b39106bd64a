"""The loop's first two security layers (seed 001, 4.1 and 4.2), as pure functions.

Layer 1, the policy (`[loop.policy]`): blocked tools, protected paths, dangerous
commands (the configured patterns and the built-in checks on the parsed command,
policy/commands.py), blocked hosts. A refusal never runs and never asks: it is the
call's result, naming the rule. Layer 2, permission: a call of a tool the owner always
allows, or one a standing "always allow" answer covers (standing.py: exactly what the
owner was shown, or a pattern the owner wrote), runs; one a "never allow" covers is
refused like a policy rule; anything else asks the owner "Allow {tool}: {summary}?" with
yes, no, always allow and never allow. After outside data (a Raw result of a reading
tool), a write is asked about even where a standing answer would let it run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ...addresses import normal_host
from ...config import LoopConfig
from ...errors import ToolFailed
from ...journal import Semantics
from ...journal.question_kinds import QuestionKind
from ...journal.turns import PermissionRule
from ...policy import commands
from ...tools.hosts import HostPolicy, HostRefused
from ...tools.mcp import is_mcp
from ...tools.protected import NONE, Protection
from ..step_rules import Ask
from . import standing as standing_rules

PERMISSION_OPTIONS = ("approve", "deny", "always", "never")
# a tool asked about at every call (an MCP tool that may destroy data) has no "always"
EVERY_CALL_OPTIONS = ("approve", "deny", "never")

# the argument that says what a call touches, per tool (its "summary")
_SUBJECT = {
    "Bash": "command",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "WebFetch": "url",
    "Glob": "pattern",
    "Grep": "pattern",
    "Task": "description",
    "Skill": "name",
    "file.read": "path",
    "file.write": "path",
    "http.request": "url",
}
_PATH_ARGS = ("file_path", "path")
# the file tools that change the path they name (protected.py's writes-only paths)
_WRITERS = frozenset({"Write", "Edit"})


def subject(tool: str, args: dict[str, Any]) -> str:
    """What a call touches, as a standing answer names it: the command, the path, the
    host; a tool with no such argument is named alone ("*")."""
    key = _SUBJECT.get(tool)
    value = args.get(key) if key else None
    if not isinstance(value, str):
        if tool == "shell.run" and isinstance(args.get("argv"), list):
            # quoted as a shell would read it: ["sh", "-c", "a b"] is not ["sh", "-c a", "b"]
            return shlex.join(str(a) for a in args["argv"])
        return "*"
    if key == "url":
        host = urlsplit(value).hostname
        return normal_host(host) if host else value.lower()
    return value


@dataclass(frozen=True, slots=True)
class Policy:
    """`[loop]`'s rules, compiled once for the kernel's life."""

    blocked_tools: frozenset[str]
    protected_paths: tuple[str, ...]
    dangerous: tuple[re.Pattern[str], ...]
    hosts: HostPolicy  # blocked hosts, and the private targets the owner allows
    always_allow: frozenset[str]
    timeout: float
    # the protected paths compiled with the built-in ones (tools/protected.py): layer 1
    # refuses a call naming one, and the file tools refuse or leave out what they open
    protection: Protection = NONE
    builtin_dangerous: bool = True
    declared: tuple[standing_rules.Declared, ...] = ()
    tainted_writes: bool = True

    @classmethod
    def of(cls, config: LoopConfig, *, home: Path | None = None) -> Policy:
        """`home`: pfar's home, protected with the credential folders (default
        `$PFAR_HOME`)."""
        p = config.policy
        return cls(
            frozenset(p.blocked_tools),
            tuple(p.protected_paths),
            tuple(re.compile(d) for d in p.dangerous_commands),
            HostPolicy.of(p.blocked_hosts, p.allowed_private_hosts),
            frozenset(config.always_allow),
            config.permission_timeout_seconds,
            Protection.of(p.protected_paths, home=home, unprotect=p.unprotect),
            p.builtin_dangerous_commands,
            standing_rules.declared(config.allow, config.deny),
            p.tainted_writes,
        )

    def refusal(self, tool: str, args: dict[str, Any], workdir: Path) -> str | None:
        """Layer 1: why this call may not run at all, or None."""
        if tool in self.blocked_tools:
            return (
                f"Blocked by security policy: the tool {tool} is blocked "
                "([loop.policy] blocked_tools)"
            )
        if (protected := self.path_refusal(args, workdir, tool)) is not None:
            return protected
        command = subject(tool, args) if tool in standing_rules.COMMANDS else None
        if command is not None and command != "*":
            for pattern in self.dangerous:
                if pattern.search(command):
                    return (
                        "Blocked by security policy: the command matches the dangerous "
                        f"pattern {pattern.pattern!r} ([loop.policy] dangerous_commands)"
                    )
            why = commands.danger(command) if self.builtin_dangerous else None
            if why is not None:
                return (
                    f"Blocked by security policy: the command {why} (a built-in check; "
                    "[loop.policy] builtin_dangerous_commands)"
                )
        url = args.get("url")
        if isinstance(url, str):
            return self.hosts.name_refusal(url)  # the addresses: `url_refusal`
        return None

    def path_refusal(self, args: dict[str, Any], workdir: Path, tool: str = "") -> str | None:
        """Why a path the call (of `tool`) names is protected, or None."""
        writing = tool in _WRITERS
        for key in _PATH_ARGS:
            value = args.get(key)
            if isinstance(value, str) and (rule := self._protected(value, workdir, writing)):
                return f"Blocked by security policy: {value} is a protected path ({rule})"
        return None

    async def url_refusal(self, args: dict[str, Any]) -> str | None:
        """Layer 1 for a URL, by what its host resolves to (every address): why it may
        not be reached, or None. A host that cannot be resolved is not refused here:
        the tool says so when it runs (and judges the addresses again, then)."""
        url = args.get("url")
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            return None
        try:
            await self.hosts.target(url)
        except HostRefused as exc:
            return str(exc)
        except ToolFailed:
            return None
        return None

    def _protected(self, value: str, workdir: Path, writing: bool) -> str | None:
        """The rule protecting the path a call names, by its text and by where its
        symlinks lead now (the file tools check again on what they open)."""
        target = value if os.path.isabs(value) else os.path.join(workdir, value)
        try:
            real = os.path.realpath(target)
        except OSError:  # a symlink on the way changed meanwhile: the tool checks again
            real = os.path.normpath(target)
        for where in (os.path.normpath(target), real):
            for base in (os.path.normpath(workdir), _real(workdir)):
                relative = os.path.relpath(where, base)
                if relative != ".." and not relative.startswith("../"):
                    break
            else:
                relative = ""
            parts = tuple(p for p in relative.split("/") if p not in ("", "."))
            if why := self.protection.rule(parts, where, writing=writing):
                return why
        return None

    def standing(
        self, rules: Sequence[PermissionRule], tool: str, args: dict[str, Any]
    ) -> Literal["allow", "deny"] | None:
        """The owner's standing answer that covers this call (a "never" wins)."""
        return standing_rules.decide(rules, self.declared, tool, subject(tool, args))

    def ask(
        self,
        rules: Sequence[PermissionRule],
        tool: str,
        args: dict[str, Any],
        semantics: Semantics,
        tainted_by: str | None = None,
        asks: bool | None = None,
    ) -> Ask | None:
        """Layer 2: the permission question this call needs, or None to let it run.
        `tainted_by` names the outside data read since the owner's last message: a write
        after it is asked about whatever standing answer or always_allow covers it.
        `asks` is the tool's own rule (an MCP tool's, tools/mcp/semantics.py): True asks
        every call, whatever allows it, and offers no "always"; False lets it run as
        always_allow would."""
        what = subject(tool, args)
        shown = _shown(tool, what, args)
        verb = "change" if semantics is Semantics.Write else "use"
        allowed = asks is False or (
            asks is None
            and (tool in self.always_allow or self.standing(rules, tool, args) == "allow")
        )
        suspended = (
            allowed
            and self.tainted_writes
            and tainted_by is not None
            and semantics is Semantics.Write
        )
        if allowed and not suspended:
            return None
        why = (
            f" It would run without a question, but the task read outside data since your "
            f"last message ({tainted_by}), so it asks ([loop.policy] tainted_writes)."
            if suspended
            else ""
        )
        if asks:
            return Ask(
                QuestionKind.permission,
                f"Allow {tool}: {shown}? (the task wants to {verb} this; the tool may "
                'destroy data, so it is asked about at every call; "never" refuses it)'
                f"{why}",
                EVERY_CALL_OPTIONS,
                on_deny="skip",
                timeout=self.timeout,
            )
        return Ask(
            QuestionKind.permission,
            f'Allow {tool}: {shown}? (the task wants to {verb} this; "always" allows '
            f"{standing_rules.scope(tool, what)}, in later tasks and any directory too; "
            f'"never" refuses it){why}',
            PERMISSION_OPTIONS,
            on_deny="skip",
            timeout=self.timeout,
        )

    def ask_unusual(self, tool: str, args: dict[str, Any], why: Sequence[str]) -> Ask:
        """The question for a call layer 3 found unusual (`[loop.anomaly] action = "ask"`)."""
        what = subject(tool, args)
        shown = _shown(tool, what, args)
        return Ask(
            QuestionKind.permission,
            f'Allow {tool}: {shown}? It is unusual: {"; ".join(why)}. ("always" allows '
            f"{standing_rules.scope(tool, what)}, in later tasks and any directory too)",
            PERMISSION_OPTIONS,
            on_deny="skip",
            timeout=self.timeout,
        )


def _shown(tool: str, what: str, args: dict[str, Any]) -> str:
    """What a prompt shows of a call: its subject, or an MCP tool's arguments (it has
    no argument pfar knows as its subject), within 200 characters."""
    if what == "*" and is_mcp(tool):
        what = json.dumps(args, ensure_ascii=False)
    return what if len(what) <= 200 else what[:200] + "…"


def _real(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except OSError:
        return os.path.normpath(path)


def remembered(
    tool: str, args: dict[str, Any], decision: Literal["allow", "deny"], task_id: str
) -> PermissionRule:
    return PermissionRule(tool, subject(tool, args), decision, task_id)
