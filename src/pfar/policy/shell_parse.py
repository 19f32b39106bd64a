"""A shell command split into the simple commands it runs, read the way bash reads it.

A command is split into its simple commands (across `;`, `&&`, `||`, `|`, `&`, newlines,
subshells, `$(...)` and backticks, and the strings `bash -c`, `sh -c`, `eval`, `su -c`,
`env -S`, `watch` and `find -exec` run), each with its quoting removed and the words of
wrappers (`sudo`, `env`, `nohup`, `timeout`, `xargs` ...) and leading `NAME=value`
assignments dropped. What is done with them is the caller's: the built-in checks on
dangerous commands (commands.py), the standing answers that cover a command.

shlex from the standard library does the quoting; bashlex, the one full bash parser for
Python, is GPL-licensed, so it is not used.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

_PUNCTUATION = "();<>|&\n"
MAX_DEPTH = 6  # `bash -c "sh -c '...'"`: nesting deeper than this is itself refused

# a redirection operator, and whether its target is written to
_REDIRECTS = {">": True, ">>": True, ">|": True, "&>": True, "&>>": True, ">&": True}
_REDIRECTS |= {"<": False, "<<": False, "<<<": False, "<>": True, "<&": False}

# words that start a command without being it
_KEYWORDS = {"{", "}", "!", "if", "then", "do", "else", "elif", "while", "until", "time"}
_KEYWORDS |= {"exec", "command", "builtin", "nohup", "setsid", "unbuffer", "coproc"}
# wrappers, and those of their options that take a value
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-p", "-C", "-D", "-r", "-t", "-U", "-h", "-R", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "--unset", "--chdir"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u"}),
    "timeout": frozenset({"-k", "-s", "--kill-after", "--signal"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset({"-I", "-n", "-P", "-d", "-L", "-s", "-a", "-E", "-i", "-l"}),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "busybox": frozenset(),
}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash"}


@dataclass(frozen=True, slots=True)
class Simple:
    """One simple command: its words (wrappers and assignments dropped), where its
    output goes, and whether it reads a pipe or runs a process substitution."""

    argv: tuple[str, ...]
    writes_to: tuple[str, ...] = ()
    piped: bool = False
    substituted: bool = False  # `<(...)` among its words or as its input

    @property
    def name(self) -> str:
        return os.path.basename(self.argv[0]) if self.argv else ""


class TooDeep(ValueError):
    pass


def simple_commands(command: str, depth: int = 0) -> list[Simple]:
    """Every simple command `command` runs, nested ones included."""
    if depth > MAX_DEPTH:
        raise TooDeep(command)
    found: list[Simple] = []
    for simple in _segments(command):
        found.append(simple)
        for inner in _nested(simple):
            found.extend(simple_commands(inner, depth + 1))
    for word_or_text in _substitutions(command):
        found.extend(simple_commands(word_or_text, depth + 1))
    return found


# -- splitting ------------------------------------------------------------------------


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""  # a `#` is read as a word: a command after it is still checked
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: bash would refuse it; read it word by word
        return re.findall(r"[();<>|&\n]+|[^\s();<>|&]+", command)


def _is_operator(token: str) -> bool:
    return bool(token) and all(c in _PUNCTUATION for c in token)


def _segments(command: str) -> Iterator[Simple]:
    words: list[str] = []
    writes: list[str] = []
    piped = substituted = False
    next_piped = False
    tokens = _tokens(command)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not _is_operator(token):
            words.append(token)
            continue
        if token in _REDIRECTS:
            target = tokens[i] if i < len(tokens) else ""
            if _is_operator(target):  # `< <(curl ...)`: a process substitution as input
                substituted = substituted or "(" in target
            else:
                i += 1
                if _REDIRECTS[token]:
                    writes.append(target)
            continue
        if token.endswith(("<(", ">(")):
            substituted = True
        # any other operator ends the simple command; a single `|` pipes into the next
        next_piped = token.endswith("|") and not token.endswith("||")
        yield from _one(words, writes, piped, substituted)
        words, writes, substituted = [], [], False
        piped, next_piped = next_piped, False
    yield from _one(words, writes, piped, substituted)


def _one(words: list[str], writes: list[str], piped: bool, substituted: bool) -> Iterator[Simple]:
    argv = _unwrap(words)
    if argv or writes:
        yield Simple(tuple(argv), tuple(writes), piped, substituted)


def _unwrap(words: list[str]) -> list[str]:
    """The words of the command itself: keywords, `NAME=value` and wrappers dropped."""
    i = 0
    while i < len(words):
        word = words[i]
        base = os.path.basename(word)
        if word in _KEYWORDS or re.match(r"^[A-Za-z_]\w*=", word):
            i += 1
        elif base in _WRAPPERS:
            i += 1
            takes_value = _WRAPPERS[base]
            while i < len(words) and (
                words[i].startswith("-") or (base == "env" and "=" in words[i])
            ):
                if base == "env" and words[i] in ("-S", "--split-string"):
                    return ["eval", *words[i + 1 :]]  # its string is a command of its own
                i += 1 + (words[i] in takes_value)
            if base == "timeout" and i < len(words):
                i += 1  # its duration
            if base in ("chrt", "taskset") and i < len(words):
                i += 1  # the priority or the cpu mask
        else:
            break
    return words[i:]


def _nested(simple: Simple) -> Iterator[str]:
    """The command strings a simple command runs: `bash -c STRING`, `eval ...` etc."""
    argv = list(simple.argv)
    name = simple.name
    if name in SHELLS or name == "su":
        for j, word in enumerate(argv[1:], start=1):
            if re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", word) or word == "--command":
                rest = [w for w in argv[j + 1 :] if not w.startswith("-")]
                if rest:
                    yield rest[0]
                return
    elif name in ("eval", "watch"):
        yield " ".join(w for w in argv[1:] if not w.startswith("-") or name == "eval")
    elif name == "find":
        for j, word in enumerate(argv):
            if word in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((k for k in range(j + 1, len(argv)) if argv[k] in (";", "+")), None)
                yield shlex.join(argv[j + 1 : end])


def _substitutions(command: str) -> Iterator[str]:
    """The commands inside `$(...)` and backticks, even within double quotes (one pass:
    a command of any length costs its length)."""
    for match in re.finditer(r"`([^`]*)`", command):
        yield match.group(1)
    opened: list[int | None] = []  # the start of each open `$(`, None for a plain `(`
    for i, c in enumerate(command):
        if c == "(":
            opened.append(i + 1 if i and command[i - 1] == "$" else None)
        elif c == ")" and opened:
            start = opened.pop()
            if start is not None:
                yield command[start:i]
    for start in opened:  # unclosed: bash would refuse it; read what follows all the same
        if start is not None:
            yield command[start:]
