"""What a sandbox mounts away or keeps read-only, beyond the read-only system and the
task's writable directory (sandbox.py puts them together).

Three kinds of place can carry a task's command out of its sandbox:
- what it must not read: pfar's home and the owner's credential folders (hidden);
- a socket to something that runs programs as the owner: the per-user runtime folder
  (systemd's user manager, D-Bus, gpg-agent, ssh-agent) and Docker's socket (hidden:
  a unix socket's `connect()` is stopped only by the path not being there);
- a file the owner's own programs run later: a repository's `.git/` (hooks, config
  programs), shell start-up files, git's and systemd's user config (read-only, where
  they lie inside the task's directory: elsewhere the whole system is read-only);
- what later tasks read as the owner's words: the task directory's `.pfar/`, where its
  skills are (read-only).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..vault.key_paths import key_places
from . import git_safe
from .credential_paths import CREDENTIAL_PATHS

# sockets of services that start programs for whoever connects
_SERVICE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock")
# the owner's files, relative to their home directory, that their own programs run
_STARTUP_FILES = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".gitconfig",
    ".config/git",
    ".config/fish",
    ".config/systemd",
    ".config/autostart",
    ".local/bin",
    ".local/share/systemd",
)
_GIT_WALK_ENTRIES = 20_000  # how much of a task's directory is looked through for `.git`
_GIT_WALK_DEPTH = 6
_SKIPPED = frozenset({"node_modules", ".venv", "venv", "__pycache__", ".tox", "target"})


def owner_home() -> Path:
    return Path(os.path.expanduser("~"))


def hidden_paths(home: Path, owner: Path | None = None) -> tuple[Path, ...]:
    """What no sandbox of this pfar home sees: the home, the vault's key files and
    pfar's key directory, the owner's credential folders and files, the per-user
    runtime folder and service sockets that exist."""
    owner = owner_home() if owner is None else owner
    found = [home, Path(f"/run/user/{os.getuid()}"), *map(Path, _SERVICE_SOCKETS)]
    found += key_places(home, owner)
    found += [owner / name for name in CREDENTIAL_PATHS]
    return tuple(p for p in found if os.path.lexists(p))


def read_only_inside(work: Path, owner: Path | None = None) -> list[Path]:
    """What stays read-only in the task's writable directory: every `.git` folder in it
    (a bounded walk), and the owner's start-up files when it holds their home."""
    owner = owner_home() if owner is None else owner
    found = list(_git_dirs(work))
    for name in _STARTUP_FILES:
        path = owner / name
        if os.path.lexists(path) and _inside(path, work):
            found.append(path)
    return found


def skills_binds(work: Path) -> list[str]:
    """Mount arguments that keep the task directory's `.pfar/` (its skills: later tasks
    started there are given them) read-only. The whole folder, not only `skills/` in
    it: a command could rename a folder that holds a mount, never the mount itself.
    Missing, it is an empty read-only tmpfs (its mount point, an empty `.pfar/`, stays
    behind); a symlink is left as it is (the skills finder never follows one, and
    docs/skills.md says a command can replace it)."""
    place = work / ".pfar"
    if not os.path.lexists(place):
        if not os.access(work, os.W_OK):
            return []  # no command makes it either; nor could bubblewrap its mount point
        return ["--tmpfs", str(place), "--remount-ro", str(place)]
    if place.is_symlink():
        return []
    return ["--ro-bind", str(place), str(place)]


def resolved(path: Path) -> Path | None:
    """The path a mount covers (a link's target: mounts are on what it names); None for
    a path that is not there."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def hide(path: Path) -> list[str]:
    """Mount arguments that make `path` empty inside: a tmpfs over a folder, /dev/null
    over anything else (a file, a socket)."""
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def worktree_binds(work: Path) -> list[str]:
    """For a task in a worktree pfar made (`<repository>/.worktrees/<name>`, or a folder
    in one): what `git add` needs there (git_safe.sandbox_binds: the worktree's own
    index and HEAD, the loose objects; refs, config and hooks stay read-only), with the
    files in its admin folder that point git elsewhere (`commondir`, `gitdir`,
    `config.worktree`) read-only again: a command that rewrote them would make the
    owner's own git read a config it wrote.

    The admin folder is found from the repository's git directory, which the sandbox
    cannot write, never from the worktree's own `.git` file, which it can: a command
    that rewrote that file gets no binds at all."""
    root = worktree_root(work)
    if root is None:
        return []
    common = root.parent.parent / ".git"
    admin = _worktree_admin(common, root)
    if admin is None:
        return []
    binds: list[str] = []
    for bind in git_safe.sandbox_binds(root, admin):
        binds += ["--bind" if bind.writable else "--ro-bind", str(bind.path), str(bind.path)]
    for name in ("commondir", "gitdir"):
        if (admin / name).is_file():
            binds += ["--ro-bind", str(admin / name), str(admin / name)]
    # missing, it would be made by a command (a config git reads with worktreeConfig)
    binds += ["--ro-bind", "/dev/null", str(admin / "config.worktree")]
    return binds


def worktree_root(work: Path) -> Path | None:
    """The worktree pfar made that holds `work` (`<repository>/.worktrees/<name>`), or
    None. A task started in a folder of it needs the rest of it visible (read-only) for
    git to find its repository."""
    for folder in (work, *work.parents):
        if folder.parent.name == ".worktrees":
            common = folder.parent.parent / ".git"
            return folder if common.is_dir() and not common.is_symlink() else None
    return None


def _worktree_admin(common: Path, root: Path) -> Path | None:
    """The folder in `common/worktrees/` whose `gitdir` names `root/.git` (git wrote it
    when it added the worktree), or None."""
    for admin in _children(common / "worktrees"):
        try:
            named = (admin / "gitdir").read_text().strip()
        except OSError:
            continue
        if Path(named) == root / ".git":
            return admin
    return None


def _git_dirs(work: Path) -> Iterator[Path]:
    """`.git` folders in `work`, to a bounded depth and number of entries; a repository
    past the bound is not made read-only (docs/sandbox.md says so)."""
    seen = 0
    stack = [(work, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > _GIT_WALK_ENTRIES:
                return
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name == ".git":
                yield Path(entry.path)
            elif depth < _GIT_WALK_DEPTH and entry.name not in _SKIPPED:
                stack.append((Path(entry.path), depth + 1))


def _inside(path: Path, folder: Path) -> bool:
    real = resolved(path)
    return real is not None and real.is_relative_to(folder)


def _children(folder: Path) -> Iterable[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
