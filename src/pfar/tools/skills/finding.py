"""Finding the skills a loop task is given: `$PFAR_HOME/skills/<name>/` and the task
directory's `.pfar/skills/<name>/`, each checked as a template is before it is loaded.

A skill's words reach the model and its scripts are run by the model's Bash calls, so a
skill another local user could change is one that user could steer the task with. A
folder is skipped, and named with why, when:

* it, its SKILL.md, or a folder above them is owned by another user or writable by
  group or others (vault/perms.py's rule);
* it or its SKILL.md is a symlink (a skill is a folder of its own: a link could lead
  into the vault, and is never followed), or SKILL.md is not a regular file or has
  other names (a hard link);
* SKILL.md is too big, not UTF-8, or its front matter does not follow the format;
* its name (or the path to it) is not UTF-8: a skill's path goes into the journal, the
  owner's messages and the prompt, and is shown there with its bytes escaped.

Every folder is opened relative to the one before it with O_NOFOLLOW, and the checks
are made on the open descriptors, so a folder swapped for a symlink while it is read
cannot lead the read elsewhere.

On a name found in both places the home's skill wins (the task directory's is
skipped, saying so): a repository a task works in cannot stand in for a skill the
owner wrote.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from ...errors import UnsafePermissions
from ...journal.turns import SkillSeen
from ...vault.perms import check_private, problem_of
from .format import MAX_SKILL_BYTES, SkillFile, Unusable, parse

Source = Literal["home", "task"]
# where a task directory keeps its skills
TASK_SKILLS: Final = (".pfar", "skills")
# skills given to one task, at most (their descriptions are in every model call)
MAX_SKILLS: Final = 100
_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LINK: Final = "is a symbolic link (a skill's folder is never followed)"
_NOT_UTF8: Final = "its name is not UTF-8 (rename it to be given it)"


@dataclass(frozen=True, slots=True)
class Skipped:
    """A skill folder not given to tasks, and why."""

    source: Source
    path: str
    why: str

    def line(self) -> str:
        return f"{self.path}: {self.why}"


@dataclass(frozen=True, slots=True)
class Found:
    """What a task started in a directory is given, and what it is not."""

    skills: tuple[SkillSeen, ...]
    skipped: tuple[Skipped, ...]


def find(home_skills: Path, directory: Path) -> Found:
    """The skills of `home_skills` ($PFAR_HOME/skills) and of `directory`'s
    .pfar/skills, sorted by name, the home's first on a clash."""
    skills: dict[str, SkillSeen] = {}
    skipped: list[Skipped] = []
    places: tuple[tuple[Source, Path, tuple[str, ...]], ...] = (
        ("home", home_skills.parent, (home_skills.name,)),
        ("task", directory, TASK_SKILLS),
    )
    for source, base, parts in places:
        for found in _scan(source, base, parts):
            if isinstance(found, Skipped):
                skipped.append(found)
            elif found.name in skills:
                skipped.append(
                    Skipped(
                        source,
                        found.path,
                        f"a skill named {found.name!r} is in {skills[found.name].path} "
                        "too, and the home's wins",
                    )
                )
            elif len(skills) >= MAX_SKILLS:
                skipped.append(Skipped(source, found.path, f"over {MAX_SKILLS} skills"))
            else:
                skills[found.name] = found
    return Found(tuple(skills[n] for n in sorted(skills)), tuple(skipped))


def _scan(source: Source, base: Path, parts: tuple[str, ...]) -> Iterator[SkillSeen | Skipped]:
    where = base.joinpath(*parts)
    shown = printable(str(where))
    try:
        check_private(base)  # the folders above: another user must not swap them
    except UnsafePermissions as exc:
        if where.exists():
            yield Skipped(source, shown, printable(str(exc)))
        return
    try:
        # the place itself is the owner's (the task's directory, the home): a symlink to
        # it is followed, as check_private followed it; nothing below it is
        fd = os.open(base, _DIR & ~os.O_NOFOLLOW)
    except OSError:
        return  # no such directory: nothing to find
    try:
        for name in parts:
            try:
                inner = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                return
            except OSError as exc:
                yield Skipped(source, shown, _not_a_folder(exc, fd, name))
                return
            os.close(fd)
            fd = inner
            if problem := problem_of(os.fstat(fd)):
                yield Skipped(source, shown, f"the folder {name} {problem}")
                return
        if not is_utf8(str(where)):
            yield Skipped(source, shown, "its path is not UTF-8 (no skill in it is given)")
            return
        for name in sorted(os.listdir(fd)):
            if name.startswith("."):
                continue
            if not is_utf8(name):
                yield Skipped(source, printable(str(where / name)), _NOT_UTF8)
            else:
                yield from _one(source, fd, name, where / name)
    finally:
        os.close(fd)


def _one(source: Source, parent: int, name: str, path: Path) -> Iterator[SkillSeen | Skipped]:
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            yield Skipped(source, str(path), _LINK)
            return
        if not stat.S_ISDIR(mode):
            return  # a file beside the skills (a README): not a skill
        fd = os.open(name, _DIR, dir_fd=parent)
    except OSError as exc:
        yield Skipped(source, str(path), _not_a_folder(exc, parent, name))
        return
    try:
        if problem := problem_of(os.fstat(fd)):
            yield Skipped(source, str(path), f"its folder {problem}")
            return
        data = read_skill_md(fd)
        if isinstance(data, Unusable):
            yield Skipped(source, str(path), data.why)
            return
        parsed = parse(data, name)
        if isinstance(parsed, Unusable):
            yield Skipped(source, str(path), parsed.why)
            return
        yield seen(source, path, parsed, data)
    finally:
        os.close(fd)


def is_utf8(name: str) -> bool:
    """Whether a name from the file system is text (os.listdir hands back the bytes of
    one that is not as lone surrogates, which no UTF-8 store or terminal takes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(name: str) -> str:
    """`name` with the bytes that are not UTF-8 shown as `\\xff` escapes."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def seen(source: Source, path: Path, parsed: SkillFile, data: bytes) -> SkillSeen:
    return SkillSeen(
        name=parsed.name,
        description=parsed.description,
        source=source,
        path=str(path),
        sha256=hashlib.sha256(data).hexdigest(),
    )


def read_skill_md(folder: int) -> bytes | Unusable:
    """The bytes of SKILL.md in the open folder, or why it cannot be used."""
    try:
        fd = os.open("SKILL.md", _FILE, dir_fd=folder)
    except FileNotFoundError:
        return Unusable("has no SKILL.md")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Unusable("SKILL.md is a symbolic link (never followed)")
        return Unusable(f"SKILL.md cannot be opened: {exc.strerror}")
    try:
        st = os.fstat(fd)
        if why := unreadable(st, MAX_SKILL_BYTES):
            return Unusable(f"SKILL.md {why}")
        return read_upto(fd, MAX_SKILL_BYTES)  # parse() refuses one that grew past it
    finally:
        os.close(fd)


def unreadable(st: os.stat_result, limit: int) -> str | None:
    """Why an open file of a skill is not read, or None: not a regular file, open to
    others, with other names (hard links: the Skill tool serves no file with other
    names), or over `limit` bytes."""
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if problem := problem_of(st):
        return problem
    if st.st_nlink > 1:
        return "has other names (hard links)"
    if st.st_size > limit:
        return f"is {st.st_size:,} bytes, over {limit:,}"
    return None


def read_upto(fd: int, limit: int) -> bytes:
    """An open file's bytes, at most `limit` and one more (a file that grew past the
    limit while it was read shows it)."""
    os.set_blocking(fd, True)
    chunks: list[bytes] = []
    size = 0
    while size <= limit and (chunk := os.read(fd, 1 << 16)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[: limit + 1]


def _not_a_folder(exc: OSError, parent: int, name: str) -> str:
    if is_link(parent, name):
        return _LINK
    if exc.errno == errno.ENOTDIR:
        return "is not a folder"
    return f"cannot be opened: {exc.strerror}"


def is_link(parent: int, name: str) -> bool:
    """Whether `name` in the open folder is a symlink (an O_NOFOLLOW open of one fails
    with ELOOP or, as a directory, ENOTDIR: its lstat tells which it was)."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False
