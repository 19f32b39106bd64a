"""Paths no loop tool may read, list or change, whatever the owner answers.

Two kinds, checked the same way by every file tool (Read, Write, Edit, Glob, Grep) and
by the loop's policy before a call is asked about:

* the owner's `[loop.policy] protected_paths`, gitignore-like: a pattern without a
  slash (`.env`, `*.pem`) matches a name at any depth; one with a slash (`.git/*`)
  matches that run of names at any depth; one starting with `/` or `~` is an absolute
  path. Whatever lies inside a matching directory is protected too.
* built-in ones, by their real path: pfar's own home (the vault, the owner log,
  hooks, the control socket), where the vault's key is kept (vault/key_paths.py),
  and the usual credential files of the user's home (`~/.ssh`, `~/.aws`, ...).
  The home and the key cannot be released; a credential path can,
  by naming it in `[loop.policy] unprotect` (for a task that must use it).

And one for writes only (Write, Edit): a `.pfar/skills` folder at any depth, and what
is in it. A task started in a directory is given the skills of its `.pfar/skills`
beside the owner's, so a skill one task wrote there would be standing instructions to
every later task; a task reads them (the Skill tool serves them) but never writes them.

A tool matches the path it actually opens (symlinks resolved), never only the text
the model wrote.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..vault.key_paths import key_places
from .coding.patterns import compile_glob
from .credential_paths import CREDENTIAL_PATHS

# skills/finding.py's TASK_SKILLS (not imported: the skills package imports this module)
_TASK_SKILLS: Final = (".pfar", "skills")


@dataclass(frozen=True, slots=True)
class _Root:
    """A built-in protected path: its real absolute path, and how a refusal names it."""

    path: str
    why: str


@dataclass(frozen=True, slots=True)
class Protection:
    """The protected paths of one kernel, compiled once."""

    relative: tuple[tuple[str, re.Pattern[str]], ...] = ()
    absolute: tuple[tuple[str, re.Pattern[str]], ...] = ()
    roots: tuple[_Root, ...] = ()

    @classmethod
    def of(
        cls,
        patterns: Sequence[str],
        *,
        home: Path | str | None = None,
        user_home: Path | str | None = None,
        unprotect: Sequence[str] = (),
    ) -> Protection:
        """`patterns` from `[loop.policy] protected_paths`; `home`: pfar's home (default
        `$PFAR_HOME`); `user_home`: whose credential files are protected (default `~`);
        `unprotect`: built-in credential paths released (`~/.kube`)."""
        user = Path(user_home) if user_home is not None else Path.home()
        relative, absolute = [], []
        for raw in patterns:
            pattern = raw.strip().rstrip("/")
            if not pattern:
                continue
            if pattern.startswith("~"):
                pattern = str(user) + pattern[1:]
            if pattern.startswith("/"):
                absolute.append((raw, _anywhere_below(pattern.lstrip("/"), anchored=True)))
            else:
                pattern = pattern.removeprefix("./")
                relative.append((raw, _anywhere_below(pattern, anchored=False)))
        released = {_real(str(user) + u[1:] if u.startswith("~") else u) for u in unprotect}
        roots = []
        where = home if home is not None else os.environ.get("PFAR_HOME")
        if where:
            roots.append(_Root(_real(str(where)), "pfar's home"))
            for place in key_places(Path(where), user):
                roots.append(_Root(_real(str(place)), "where pfar keeps the vault's key"))
        for name in CREDENTIAL_PATHS:
            real = _real(str(user / name))
            if real not in released:
                roots.append(_Root(real, f"~/{name}, a credential path"))
        return cls(tuple(relative), tuple(absolute), tuple(roots))

    def rule(
        self, parts: Sequence[str] | None, absolute: str, *, writing: bool = False
    ) -> str | None:
        """Why the path is protected (the pattern or built-in path that covers it), or
        None. `parts`: its names below the working directory (None when it is not
        below it); `absolute`: its real absolute path; `writing`: the call would change
        it (a task directory's skills are protected from that only)."""
        if writing and (why := skills_rule(absolute)):
            return why
        if parts:
            rel = "/".join(parts)
            for raw, regex in self.relative:
                if regex.match(rel):
                    return f"pattern {raw!r} in [loop.policy] protected_paths"
        bare = absolute.lstrip("/")
        for raw, regex in self.absolute:
            if regex.match(bare):
                return f"pattern {raw!r} in [loop.policy] protected_paths"
        for root in self.roots:
            if absolute == root.path or absolute.startswith(root.path.rstrip("/") + "/"):
                return f"{root.why}, protected for every tool"
        return None

    def built_in_only(self) -> Protection:
        """Only pfar's home and the credential paths, not the owner's patterns."""
        return Protection(roots=self.roots)

    def rg_excludes(self) -> list[str]:
        """ripgrep `--glob` arguments leaving out what the relative patterns cover (the
        built-in and absolute ones are filtered from its output)."""
        out = []
        for raw, _ in self.relative:
            pattern = raw.strip().rstrip("/").removeprefix("./")
            out += [f"!**/{pattern}", f"!**/{pattern}/**"]
        return out


def skills_rule(absolute: str) -> str | None:
    """Why a write to `absolute` (a real path) is refused when it is, or is in, a
    `.pfar/skills` folder; None otherwise."""
    names = absolute.split("/")
    width = len(_TASK_SKILLS)
    if any(tuple(names[i : i + width]) == _TASK_SKILLS for i in range(len(names))):
        return (
            "a task directory's skills, which later tasks started there are given: "
            "no task writes them, only their owner"
        )
    return None


def _anywhere_below(pattern: str, *, anchored: bool) -> re.Pattern[str]:
    """A regex for paths the pattern covers: itself or anything inside it, at any
    depth unless `anchored`."""
    lead = "" if anchored else "**/"
    itself, inside = compile_glob(lead + pattern), compile_glob(f"{lead}{pattern}/**")
    return re.compile(f"(?:{itself.pattern})|(?:{inside.pattern})", re.DOTALL)


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


NONE: Final = Protection()
