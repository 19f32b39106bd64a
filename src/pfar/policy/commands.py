"""Dangerous shell commands, found on the parsed command rather than by regex on its text.

A command is split into its simple commands (across `;`, `&&`, `||`, `|`, `&`, newlines,
subshells, `$(...)` and backticks, and the strings `bash -c`, `sh -c`, `eval`, `su -c`,
`env -S`, `watch` and `find -exec` run), each with its quoting removed and the words of
wrappers (`sudo`, `env`, `nohup`, `timeout`, `xargs` ...) and leading `NAME=value`
assignments dropped. The checks then read flags the way the programs do: combined
(`-rf`, `-fR`), split (`-r -f`), long (`--recursive`), in any order.

This is layer 1 of the loop, a speed bump and not a guard: a command that builds its
words at run time (variables, `base64 -d | ...` into a file run later, a script the task
wrote, an alias, a program of its own) passes. What holds is the sandbox.

shlex from the standard library does the quoting; bashlex, the one full bash parser for
Python, is GPL-licensed, so it is not used.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

_PUNCTUATION = "();<>|&\n"
_MAX_DEPTH = 6  # `bash -c "sh -c '...'"`: nesting deeper than this is itself refused

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
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash"}
# interpreters, and the options after which the program is an argument, not stdin
_INTERPRETERS = {
    "python": {"-c", "-m"},
    "perl": {"-e", "-E"},
    "ruby": {"-e"},
    "node": {"-e", "-p", "--eval", "--print"},
    "nodejs": {"-e", "-p", "--eval", "--print"},
    "php": {"-r"},
    "lua": {"-e"},
    "luajit": {"-e"},
    "pwsh": {"-c", "-command", "-Command"},
    "Rscript": {"-e"},
    "osascript": {"-e"},
}
_SAFE_DEVICES = {"null", "zero", "full", "random", "urandom", "stdin", "stdout", "stderr", "tty"}
_SYSTEM_DIRS = {
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt",
    "opt", "proc", "root", "run", "sbin", "snap", "srv", "sys", "usr", "var",
    "Applications", "Library", "System", "Users", "Volumes", "private",
}  # fmt: skip
_HOME_WORD = re.compile(r"^(~[\w.-]*|\$HOME|\$\{HOME\})$")
_NAME_BEFORE = re.compile(r"[^(){}|&;]{1,64}$")  # a function's name, before its `(){`
_PUSH_DANGER = (
    "--force",
    "--force-with-lease",
    "--force-if-includes",
    "--mirror",
    "--delete",
    "--prune",
)


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
    if depth > _MAX_DEPTH:
        raise TooDeep(command)
    found: list[Simple] = []
    for simple in _segments(command):
        found.append(simple)
        for inner in _nested(simple):
            found.extend(simple_commands(inner, depth + 1))
    for word_or_text in _substitutions(command):
        found.extend(simple_commands(word_or_text, depth + 1))
    return found


def danger(command: str) -> str | None:
    """Why `command` is refused by the built-in checks, or None."""
    if _fork_bomb(command):
        return "is a fork bomb"
    try:
        simples = simple_commands(command)
    except TooDeep:
        return f"nests shells more than {_MAX_DEPTH} deep"
    for simple in simples:
        why = _check(simple)
        if why is not None:
            return why
    return None


def _fork_bomb(command: str) -> bool:
    """A function that pipes itself into itself in the background, `NAME(){ NAME|NAME& }`,
    spaced any way: defining one is refused, called or not (found without a backtracking
    regex, so a long command costs its length)."""
    flat = re.sub(r"\s+", "", command)
    for found in re.finditer(r"\(\)\{", flat):
        before = _NAME_BEFORE.search(flat, max(0, found.start() - 64), found.start())
        if before is None:
            continue
        run = before.group(0)
        body = flat[found.end() : found.end() + 2 * len(run) + 3]
        for k in range(len(run)):  # `x;:(){` names `:`: try each ending of the run
            name = run[k:]
            if body.startswith(f"{name}|{name}&}}"):
                return True
    return False


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
    if name in _SHELLS or name == "su":
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


# -- the checks -----------------------------------------------------------------------


def _check(simple: Simple) -> str | None:
    for target in simple.writes_to:
        if _device(target):
            return f"writes to the device {target}"
    if not simple.argv:
        return None
    name = simple.name
    checks = {
        "rm": _rm,
        "find": _find,
        "chmod": _recursive_mode,
        "chown": _recursive_mode,
        "chgrp": _recursive_mode,
        "dd": _dd,
        "shred": _shred,
        "git": _git_push,
    }
    if name in checks:
        why = checks[name](simple.argv)
        if why is not None:
            return why
    if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs"):
        return f"formats a filesystem ({name})"
    return _interpreter(simple)


def _flags(argv: tuple[str, ...]) -> tuple[set[str], list[str]]:
    """The options (short ones split: `-rf` is `-r` and `-f`) and the other words."""
    flags: set[str] = set()
    words: list[str] = []
    options = True
    for word in argv[1:]:
        if options and word == "--":
            options = False
        elif options and word.startswith("--"):
            flags.add(word.split("=", 1)[0])
        elif options and word.startswith("-") and len(word) > 1:
            flags.update(f"-{c}" for c in word[1:])
        else:
            words.append(word)
    return flags, words


def _rm(argv: tuple[str, ...]) -> str | None:
    flags, targets = _flags(argv)
    if "--no-preserve-root" in flags:
        return "deletes with --no-preserve-root"
    if flags & {"-r", "-R", "--recursive"}:
        for target in targets:
            if _precious(target):
                return f"deletes {target} recursively"
    return None


def _find(argv: tuple[str, ...]) -> str | None:
    starts = []
    for word in argv[1:]:
        if word.startswith(("-", "(", "!")):
            break
        starts.append(word)
    deletes = "-delete" in argv or any(
        w in ("-exec", "-execdir", "-ok", "-okdir")
        and j + 1 < len(argv)
        and os.path.basename(argv[j + 1]) in ("rm", "shred", "unlink")
        for j, w in enumerate(argv)
    )
    if deletes:
        for start in starts:
            if _precious(start):
                return f"deletes what find finds under {start}"
    return None


def _recursive_mode(argv: tuple[str, ...]) -> str | None:
    flags, words = _flags(argv)
    if flags & {"-R", "--recursive"}:
        for target in words[1:]:
            if _precious(target):
                return f"changes {target} recursively ({os.path.basename(argv[0])} -R)"
    return None


def _dd(argv: tuple[str, ...]) -> str | None:
    for word in argv[1:]:
        if word.startswith("of=") and _device(word[3:]):
            return f"writes to the device {word[3:]} (dd)"
    return None


def _shred(argv: tuple[str, ...]) -> str | None:
    _, words = _flags(argv)
    for word in words:
        if _device(word) or _precious(word):
            return f"shreds {word}"
    return None


def _git_push(argv: tuple[str, ...]) -> str | None:
    i = 1
    while i < len(argv) and argv[i].startswith("-"):  # git's own options
        i += 2 if argv[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    if i >= len(argv) or argv[i] != "push":
        return None
    positional: list[str] = []
    j = i + 1
    while j < len(argv):
        word = argv[j]
        j += 1
        if word in ("-o", "--push-option", "--repo", "--receive-pack", "--exec"):
            j += 1
        elif word.startswith("--"):
            name = word.split("=", 1)[0]
            # git takes any unambiguous beginning of a long option (`--forc`, `--mir`)
            if len(name) > 3 and any(d.startswith(name) for d in _PUSH_DANGER):
                return f"force-pushes or deletes on the remote (git push {word})"
        elif word.startswith("-") and len(word) > 1:
            if set(word[1:]) & {"f", "d"}:
                return f"force-pushes or deletes on the remote (git push {word})"
        else:
            positional.append(word)
    for refspec in positional[1:]:
        if refspec.startswith("+"):
            return f"force-pushes {refspec} (git push)"
        if refspec.startswith(":"):
            return f"deletes the remote's {refspec[1:]} (git push {refspec})"
    return None


def _interpreter(simple: Simple) -> str | None:
    """A pipe or a process substitution run as a program: `curl ... | sh`."""
    name = simple.name
    family = re.sub(r"[\d.]+$", "", name)  # python3.12, perl5, lua5.4
    if name in ("source", ".") and simple.substituted:
        return f"runs downloaded or generated text as a program ({name} <(...))"
    if name in _SHELLS:
        code_options = {"-c"}
    elif family in _INTERPRETERS:
        code_options = _INTERPRETERS[family]
    else:
        return None
    flags: list[str] = []
    program: str | None = None
    for word in simple.argv[1:]:
        if word.startswith("-") and word != "-":
            flags.append(word)
        else:
            program = word
            break
    if name in _SHELLS:
        gives_code = any(re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", f) for f in flags)
        reads_stdin = any(re.fullmatch(r"-[a-zA-Z]*s[a-zA-Z]*", f) for f in flags)
    else:
        gives_code = any(f.split("=", 1)[0] in code_options for f in flags)
        reads_stdin = False
    if simple.substituted:
        return f"runs a process substitution as a program ({name} <(...))"
    if gives_code and not reads_stdin:
        return None
    if simple.piped and (program is None or program == "-" or reads_stdin):
        return f"pipes into an interpreter ({' '.join(simple.argv[:3])})"
    return None


# -- what is precious -----------------------------------------------------------------


def _precious(target: str) -> bool:
    """`/`, the home, a top-level system directory, or everything in one (`/*`)."""
    word = target.strip()
    while True:  # `/*`, `~/.*`, `/home/*`: everything in the directory
        stripped = re.sub(r"/?\.?\*$", "", word)
        if stripped == word:
            break
        word = stripped or "/"
    word = re.sub(r"/+", "/", word)
    if len(word) > 1:
        word = word.rstrip("/")
    head, _, rest = word.partition("/")
    if _HOME_WORD.match(head):  # `~/..`, `$HOME/.`: within or above the home
        normal = posixpath.normpath("/h/" + rest)
        return normal in ("/h", "/")
    if not word.startswith("/"):
        return False
    normal = posixpath.normpath(word)
    if normal == "//":
        normal = "/"
    if normal == "/" or normal == os.path.expanduser("~"):
        return True
    parts = normal.strip("/").split("/")
    return len(parts) == 1 and parts[0] in _SYSTEM_DIRS


def _device(target: str) -> bool:
    """A block or character device other than the harmless ones (/dev/null ...)."""
    normal = posixpath.normpath(re.sub(r"/+", "/", target))
    if not normal.startswith("/dev/"):
        return False
    name = normal[len("/dev/") :]
    return name not in _SAFE_DEVICES and not name.startswith(("fd/", "pts/", "shm/"))
