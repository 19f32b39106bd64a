"""A loop task's own git worktree (seed 001, 1.3 and 6.4).

With `--worktree`, a task works in `.worktrees/{task_id}` of its directory's
repository, on its own branch `pfar/{task_id[:8]}`, so that its edits never touch
the owner's checkout until the owner merges them. Made on the task's first
advance, and recorded in its settings in one commit; made again after a crash in
between finds the worktree it made (a path git already knows as a worktree of that
branch is taken as it is). A directory that is not in a repository, or a `git`
that fails, leaves the task in its directory (degraded mode): a warning, and the
owner is told why.

At the end, the task's changes are committed on its branch and the worktree is
removed; the owner is told how to merge the branch. A task that failed or was
cancelled keeps its worktree for a look (`[loop] keep_failed_worktrees`), or it is
removed with the branch kept. Every step is idempotent: a kill in the middle of
the clean-up is finished by doing it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ...journal.turns import LoopSettings

log = logging.getLogger("pfar.loop")

DIRECTORY = ".worktrees"
_GIT_SECONDS = 60


class GitFailed(Exception):
    """A git command failed; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Made:
    """The settings a task works under from now on, and what the owner should hear."""

    settings: LoopSettings
    notice: str | None


async def git(cwd: str | Path, *args: str) -> str:
    """`git args` in `cwd`: its stdout, or GitFailed with its stderr."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise GitFailed(f"git could not be run: {exc}") from exc
    try:
        async with asyncio.timeout(_GIT_SECONDS):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise GitFailed(f"git {args[0]} took over {_GIT_SECONDS} s") from None
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip().splitlines()
        raise GitFailed(f"git {args[0]}: {detail[-1] if detail else 'failed'}")
    return out.decode(errors="replace")


def branch_of(task_id: str) -> str:
    return f"pfar/{task_id[:8]}"


async def make(task_id: str, settings: LoopSettings) -> Made:
    """The task's worktree, made (or found again); degraded mode when that fails."""
    directory = Path(settings.working_dir)
    try:
        top = Path((await git(directory, "rev-parse", "--show-toplevel")).strip())
    except GitFailed as exc:
        return _degraded(settings, f"{directory} is not in a git repository ({exc})")
    inside = directory.resolve().relative_to(top.resolve())
    path = top / DIRECTORY / task_id
    branch = branch_of(task_id)
    try:
        if not await _is_worktree(top, path, branch):
            await _exclude(top)
            known = await _branch_exists(top, branch)
            args = [str(path), branch] if known else ["-b", branch, str(path), "HEAD"]
            await git(top, "worktree", "add", "--quiet", *args)
    except GitFailed as exc:
        return _degraded(settings, f"its worktree could not be made ({exc})")
    made = dataclasses.replace(
        settings,
        working_dir=str(path / inside),
        worktree=str(path),
        repository=str(top),
        branch=branch,
    )
    return Made(made, None)


def _degraded(settings: LoopSettings, why: str) -> Made:
    log.warning("loop task works without a worktree: %s", why)
    kept = dataclasses.replace(settings, worktree_error=why)
    return Made(kept, f"works in {settings.working_dir} itself, not in a worktree: {why}")


async def _is_worktree(top: Path, path: Path, branch: str) -> bool:
    listing = await git(top, "worktree", "list", "--porcelain")
    entries = [block.splitlines() for block in listing.split("\n\n")]
    for lines in entries:
        if f"worktree {path}" in lines:
            if f"branch refs/heads/{branch}" not in lines:
                raise GitFailed(f"{path} is a worktree of another branch")
            return True
    return False


async def _branch_exists(top: Path, branch: str) -> bool:
    try:
        await git(top, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except GitFailed:
        return False
    return True


async def _exclude(top: Path) -> None:
    """Keep `.worktrees/` out of the owner's `git status` (the repository's own exclude
    file, never its tracked .gitignore)."""
    common = Path((await git(top, "rev-parse", "--git-common-dir")).strip())
    exclude = (top / common if not common.is_absolute() else common) / "info" / "exclude"
    line = f"/{DIRECTORY}/"
    text = exclude.read_text() if exclude.exists() else ""
    if line not in text.splitlines():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + line + "\n")


async def _ahead(top: str, branch: str) -> bool:
    """The branch holds commits the repository's checked-out HEAD does not."""
    try:
        return int((await git(top, "rev-list", "--count", f"HEAD..{branch}")).strip()) > 0
    except (GitFailed, ValueError):
        return True  # when in doubt, keep the branch and offer it


async def finish(task_id: str, settings: LoopSettings, *, succeeded: bool, keep: bool) -> str:
    """Commit the task's changes on its branch, and remove its worktree (kept after a
    failure when `keep`). What the owner should be told; never raises: the task's
    outcome stands whatever git says."""
    if settings.worktree is None or settings.repository is None or settings.branch is None:
        return ""
    path, top, branch = Path(settings.worktree), settings.repository, settings.branch
    try:
        committed = False
        if path.exists():
            await git(path, "add", "--all")
            if (await git(path, "status", "--porcelain")).strip():
                await git(
                    path,
                    "-c",
                    "user.name=pfar",
                    "-c",
                    "user.email=pfar@localhost",
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "-m",
                    f"pfar task {task_id[:8]}: {settings.title}"[:200],
                )
                committed = True
        if succeeded or not keep:
            if path.exists():
                await git(top, "worktree", "remove", "--force", str(path))
            where = f"on branch {branch}"
        else:
            where = f"on branch {branch}, worktree kept at {path} for a look"
    except GitFailed as exc:
        log.warning("task %s: its worktree's clean-up failed: %s", task_id, exc)
        return f"Its worktree {path} (branch {branch}) was left as it is: {exc}."
    if succeeded and not await _ahead(top, branch):
        try:
            await git(top, "branch", "-D", branch)  # nothing to merge: nothing to tidy later
        except GitFailed as exc:
            log.warning("task %s: its empty branch %s stays: %s", task_id, branch, exc)
        return "It changed nothing in the repository; its branch is removed."
    changes = "Its changes are committed " if committed else "Its work is "
    if succeeded:
        return f"{changes}{where}. Merge it with: git -C {top} merge {branch}"
    return f"{changes}{where}."
