"""pfar's own git calls, which run no program a repository names.

A task's commands can write to the repository they work in: its config, its hooks, a
worktree's `.git` file. pfar itself later runs git there as the kernel's user (`git
status` for the system prompt; `git add` and `git commit` when a worktree task ends),
outside any sandbox. Every such call goes through `run` here, which:

- reads no system or global config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`,
  `GIT_ATTR_NOSYSTEM`), drops every `GIT_*` variable of the kernel's environment, and
  asks for nothing (`GIT_TERMINAL_PROMPT=0`, no askpass, `:` as editor, `cat` as pager);
- overrides, with command-line config (which wins over the repository's own), every
  key that makes git start a program: `core.fsmonitor` (empty: off in every git
  version; `false` is a program name to git before 2.36), `core.hooksPath=/dev/null`
  (no hook at all: pre-commit, post-commit, post-checkout, reference-transaction,
  post-index-change …), signing (`commit.gpgSign=false`, `gpg.*.program`), network
  helpers (`core.sshCommand`, `core.gitProxy`, `credential.helper`, and no transport
  at all: `GIT_ALLOW_PROTOCOL` empty, `protocol.*.allow=never`, no lazy fetch of a
  partial clone), `diff.external`, `core.attributesFile`, and automatic maintenance;
- reads the repository's config once more (`git config --list --name-only`, which
  runs nothing) and blanks every driver it defines: `filter.*.clean/smudge/process`
  (which `.gitattributes`, a file of the working tree, can name), `diff.*.textconv`
  and `.command`, `merge.*.driver`, and any other key whose last part names a program
  (`*.cmd`, `*.command`, `*.helper`, `*.program` …). A `required` filter then fails
  loudly instead of running;
- is given the git dir and work tree it works on (`GIT_DIR`, `GIT_WORK_TREE`,
  `GIT_COMMON_DIR`), pinned when the task started, instead of discovering them from a
  `.git` that the task may have rewritten. A worktree whose `.git` file no longer
  points at the git dir pfar made for it is refused (`Refused`): no git runs there.

Keys are passed as `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` rather than `-c k=v`, so a
driver name with `=` or spaces in it is overridden exactly. Child gits (a worktree's
checkout, `maintenance`) inherit the environment and so the overrides.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 60.0

# Command-line config for every call: each key is one git reads to start a program,
# or to reach a network (which starts helpers), or to run maintenance.
_FIXED: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", ""),
    ("core.hooksPath", "/dev/null"),
    ("core.untrackedCache", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.sshCommand", ""),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),  # an empty value clears the list of helpers
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", ""),
    ("gpg.ssh.program", ""),
    ("gpg.x509.program", ""),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("diff.external", ""),
    ("submodule.recurse", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("safe.bareRepository", "explicit"),
    ("protocol.allow", "never"),
    *((f"protocol.{p}.allow", "never") for p in ("file", "git", "ssh", "http", "https", "ext")),
)

# The last part of a config key that names a program to run, in any section:
# filter.X.clean, diff.X.textconv, merge.X.driver, credential.URL.helper, …
_PROGRAM_KEYS = frozenset(
    {
        "clean",
        "smudge",
        "process",
        "textconv",
        "command",
        "cmd",
        "driver",
        "helper",
        "program",
        "sshcommand",
        "uploadpack",
        "receivepack",
        "vcs",
        "packobjectshook",
        "defaultkeycommand",
        "alternaterefscommand",
        "fsmonitor",
        "hookspath",
        "editor",
        "pager",
        "askpass",
        "gitproxy",
    }
)


class Failed(Exception):
    """A git command failed; the message says which and why."""


class Refused(Failed):
    """pfar ran no git: the repository is not the one pinned for the task."""


@dataclass(frozen=True, slots=True)
class Repo:
    """A git dir and its work tree, pinned: what pfar's git is told, never discovers.
    `common_dir` is set for a linked worktree (its git dir is `<common>/worktrees/N`)."""

    git_dir: Path
    work_tree: Path
    common_dir: Path | None = None

    def env(self) -> dict[str, str]:
        env = {"GIT_DIR": str(self.git_dir), "GIT_WORK_TREE": str(self.work_tree)}
        if self.common_dir is not None:
            env["GIT_COMMON_DIR"] = str(self.common_dir)
        return env


def base_env(config: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The environment of every pfar git call, with `config` as command-line config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",
        SSH_ASKPASS="",
        GIT_PAGER="cat",
        GIT_EDITOR=":",
        GIT_SEQUENCE_EDITOR=":",
        GIT_ALLOW_PROTOCOL="",  # no transport at all, whatever protocol.*.allow says
        GIT_NO_LAZY_FETCH="1",  # a partial clone fetches nothing it lacks (git 2.44+)
        GIT_OPTIONAL_LOCKS="0",  # `status` leaves the index alone
        LC_ALL="C",
    )
    pairs = [*_FIXED, *config]
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


async def _exec(
    args: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float
) -> tuple[int, bytes, bytes]:
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            "--no-pager",
            *args,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise Failed(f"git could not be run: {exc}") from exc
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise Failed(f"git {args[0]} took over {timeout:g} s") from None
    assert proc.returncode is not None
    return proc.returncode, out, err


def _blanked(names: bytes) -> list[tuple[str, str]]:
    """Every key of `git config --list --name-only -z` that names a program, blanked."""
    out = []
    for raw in names.split(b"\0"):
        key = raw.decode(errors="surrogateescape").strip("\n")
        last = key.rsplit(".", 1)[-1].lower()
        if key and last in _PROGRAM_KEYS:
            out.append((key, ""))
    return out


async def run(
    cwd: Path,
    *args: str,
    repo: Repo | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> str:
    """`git args` in `cwd` (on `repo` when given, else the repository git finds from
    `cwd`): its stdout, or Failed with its stderr."""
    pinned = repo.env() if repo is not None else {}
    listing_env = {**base_env(), **pinned}
    listing = ["config", "--list", "--name-only", "-z"]
    code, names, _ = await _exec(listing, listing_env, cwd, timeout)
    drivers = _blanked(names) if code == 0 else []
    env = {**base_env(drivers), **pinned, **(extra_env or {})}
    code, out, err = await _exec(args, env, cwd, timeout)
    if code != 0:
        detail = err.decode(errors="replace").strip().splitlines()
        raise Failed(f"git {args[0]}: {detail[-1] if detail else 'failed'}")
    return out.decode(errors="replace")


async def pin(directory: Path) -> Repo | None:
    """The repository `directory` is in, found once (when a task starts, before anything
    of it ran) for every later call to be given; None outside any repository."""
    try:
        out = await run(directory, "rev-parse", "--absolute-git-dir", "--show-toplevel")
    except Failed:
        return None
    lines = out.splitlines()
    if len(lines) != 2:
        return None  # a bare repository, or a .git directory itself: no work tree
    return Repo(Path(lines[0]), Path(lines[1]))


# -- a linked worktree's git dir -----------------------------------------------------


def gitfile_target(worktree: Path) -> Path:
    """The git dir a worktree's `.git` file names, or Refused when `.git` is not such
    a file (a directory, a link, missing or unreadable)."""
    dotgit = worktree / ".git"
    try:
        st = os.lstat(dotgit)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 4096:
            raise Refused(f"{dotgit} is not a .git file")
        text = dotgit.read_text(errors="replace")
    except OSError as exc:
        raise Refused(f"{dotgit} cannot be read ({exc.strerror})") from None
    found = re.fullmatch(r"gitdir: (.+?)\n?", text)
    if found is None:
        raise Refused(f"{dotgit} does not name a git dir")
    return Path(os.path.normpath(worktree / found.group(1)))  # relative paths (git 2.48+)


def worktree_repo(worktree: Path, git_dir: Path) -> Repo:
    """A linked worktree pinned to the git dir pfar made for it (`<common>/worktrees/N`):
    Refused, with what changed, when its `.git` file points anywhere else."""
    if git_dir.parent.name != "worktrees":
        raise Refused(f"{git_dir} is not a worktree's git dir")
    target = gitfile_target(worktree)
    if os.path.realpath(target) != os.path.realpath(git_dir):
        raise Refused(
            f"{worktree / '.git'} was changed to point at {target}, not at the git dir "
            f"pfar made for this worktree ({git_dir}); pfar runs no git there"
        )
    common = git_dir.parent.parent
    try:
        named = (git_dir / "commondir").read_text().strip()
    except OSError:
        named = None  # git reads the default: the folder two up
    if named is not None and os.path.realpath(git_dir / named) != os.path.realpath(common):
        # the owner's own git would read the config and hooks of wherever it points
        raise Refused(
            f"{git_dir / 'commondir'} was changed to point at {named}, not at the "
            f"repository's git dir ({common}); pfar runs no git there"
        )
    return Repo(git_dir, worktree, common)


def head_branch(repo: Repo) -> str | None:
    """The branch a worktree's HEAD names (read from the file: git need not run), or None."""
    try:
        text = (repo.git_dir / "HEAD").read_text(errors="replace")
    except OSError:
        return None
    found = re.fullmatch(r"ref: refs/heads/(.+?)\n?", text)
    return found.group(1) if found else None


@dataclass(frozen=True, slots=True)
class Bind:
    path: Path
    writable: bool


def sandbox_binds(worktree: Path, git_dir: Path) -> tuple[Bind, ...]:
    """What a sandboxed command in a linked worktree needs for `git add`, `git status`
    and `git diff --cached` to work, as bubblewrap binds to add, in this order, after
    the work directory's: the repository's common dir read-only (visible even where the
    sandbox hides the path, e.g. under /tmp), then the worktree's own git dir (its index,
    HEAD and logs) and the loose objects (which `git add` writes) writable, then packs
    and `objects/info` (alternates, commit-graph) read-only again. Refs, config, hooks
    and info/ stay read-only: a command cannot move a branch, set a config key or plant
    a hook (a `git commit` in there fails on its ref; pfar commits the worktree's
    changes when the task ends). It can add loose objects, and delete or spoil loose
    objects not yet packed: data, never a program. Nothing when the worktree's `.git`
    no longer points at `git_dir`."""
    try:
        repo = worktree_repo(worktree, git_dir)
    except Refused:
        return ()
    assert repo.common_dir is not None
    objects = repo.common_dir / "objects"
    kept = [Bind(p, False) for p in (objects / "pack", objects / "info") if p.is_dir()]
    return (
        Bind(repo.common_dir, False),
        Bind(repo.git_dir, True),
        Bind(objects, True),
        *kept,
    )
