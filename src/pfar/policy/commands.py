"""Dangerous shell commands, found on the parsed command rather than by regex on its text.

The command is first split into the simple commands it runs, nested ones included
(shell_parse.py). The checks then read flags the way the programs do: combined
(`-rf`, `-fR`), split (`-r -f`), long (`--recursive`), in any order.

This is layer 1 of the loop, a speed bump and not a guard: a command that builds its
words at run time (variables, `base64 -d | ...` into a file run later, a script the task
wrote, an alias, a program of its own) passes. What holds is the sandbox.
"""

from __future__ import annotations

import os
import posixpath
import re

from .shell_parse import MAX_DEPTH, SHELLS, Simple, TooDeep, simple_commands

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


def danger(command: str) -> str | None:
    """Why `command` is refused by the built-in checks, or None."""
    if _fork_bomb(command):
        return "is a fork bomb"
    try:
        simples = simple_commands(command)
    except TooDeep:
        return f"nests shells more than {MAX_DEPTH} deep"
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
    if name in SHELLS:
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
    if name in SHELLS:
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
