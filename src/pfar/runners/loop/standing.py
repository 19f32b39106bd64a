"""What a standing answer covers (layer 2).

An answer the owner gave to a question ("always", "never") covers exactly what the
question showed: the same command word for word, the same path, the same host. A pattern
covers more only where the owner wrote it as one, in `[loop] allow` and `[loop] deny`:
`Bash(npm run test:*)` is one simple command whose words start with `npm run test` (not
`npm run test; id`, nor a `$(...)` in it); `Write(src/*)` a glob over the path (never a
path with a `..` in it) or the host.

Rules journaled by earlier versions were fnmatch patterns. They are read as they were
shown: an "always allow" row covers its text literally (`ls *.txt` covers `ls *.txt`,
and nothing else); a "never allow" row keeps covering what its pattern matches, since a
refusal that covers more cannot let anything run. No stored row is rewritten.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ...journal.turns import PermissionRule
from ...policy import shell_parse

# the tools whose subject is a shell command
COMMANDS = frozenset({"Bash", "shell.run"})
_HOSTS = frozenset({"WebFetch", "http.request"})  # their subject is the URL's host
_PATHS = frozenset({"Read", "Write", "Edit", "file.read", "file.write"})
_RULE = re.compile(r"^([\w.:-]+)(?:\((.+)\))?$")


@dataclass(frozen=True, slots=True)
class Declared:
    """One `[loop] allow` or `deny` entry: `tool`, and its pattern (None: every call)."""

    tool: str
    pattern: str | None
    decision: Literal["allow", "deny"]

    @classmethod
    def parse(cls, text: str, decision: Literal["allow", "deny"]) -> Declared:
        found = _RULE.match(text)
        if found is None:  # the config refuses it first; this names it all the same
            raise ValueError(f"[loop] {decision}: {text!r} is not Tool or Tool(what)")
        return cls(found.group(1), found.group(2), decision)

    def covers(self, tool: str, what: str) -> bool:
        if tool != self.tool:
            return False
        if self.pattern is None:
            return True
        if tool in COMMANDS:
            return _command_covered(self.pattern, what, self.decision)
        if ".." in re.split(r"[/\\]", what):
            return self.decision == "deny" and fnmatch.fnmatchcase(what, self.pattern)
        return fnmatch.fnmatchcase(what, self.pattern)


def declared(allow: Iterable[str], deny: Iterable[str]) -> tuple[Declared, ...]:
    return (
        *(Declared.parse(t, "deny") for t in deny),
        *(Declared.parse(t, "allow") for t in allow),
    )


def decide(
    kept: Sequence[PermissionRule], rules: Sequence[Declared], tool: str, what: str
) -> Literal["allow", "deny"] | None:
    """The standing answer for a call of `tool` on `what`; a "never" wins."""
    found: Literal["allow", "deny"] | None = None
    for rule in kept:
        if rule.tool != tool:
            continue
        if rule.decision == "deny":
            if what == rule.pattern or fnmatch.fnmatchcase(what, rule.pattern):
                return "deny"
        elif what == rule.pattern:
            found = "allow"
    for d in rules:
        if d.covers(tool, what):
            if d.decision == "deny":
                return "deny"
            found = "allow"
    return found


def scope(tool: str, what: str) -> str:
    """What an "always" answer to this question will cover, in words."""
    if what == "*":
        return f"every {tool} call"
    if tool in COMMANDS:
        return f"exactly the command {what!r}, word for word"
    if tool in _HOSTS:
        return f"any {tool} call to the host {what!r}"
    if tool in _PATHS:
        return f"{tool} on exactly the path {what!r}, whatever the call's other arguments"
    return f"{tool} on exactly {what!r}"


def _command_covered(pattern: str, what: str, decision: str) -> bool:
    if not pattern.endswith(":*"):
        if decision == "deny":  # a refusal covers the command wherever it appears
            return any(shlex.join(s.argv) == pattern for s in _simples(what)) or what == pattern
        return what == pattern
    prefix = _words(pattern[:-2])
    if prefix is None:
        return False
    if decision == "deny":
        return any(list(s.argv[: len(prefix)]) == prefix for s in _simples(what))
    words = _single(what)
    return words is not None and words[: len(prefix)] == prefix


def _simples(command: str) -> list[shell_parse.Simple]:
    try:
        return shell_parse.simple_commands(command)
    except shell_parse.TooDeep:
        return []


def _words(text: str) -> list[str] | None:
    try:
        return shlex.split(text)
    except ValueError:
        return None


def _single(command: str) -> list[str] | None:
    """The words of a command that is one simple command and nothing else: no operator,
    no redirection, no substitution, no second line."""
    if any(c in command for c in "`\n") or "$(" in command or "${" in command:
        return None
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&")
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError:
        return None
    if not tokens or any(t and all(c in "();<>|&" for c in t) for t in tokens):
        return None
    return tokens
