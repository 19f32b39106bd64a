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

Every git call goes through `tools.git_safe` (no hook, fsmonitor or other program the
repository names runs), and every call inside the worktree is given the git dir pfar
made for it (`settings.git_dir`), checked against the worktree's `.git` file first: a
`.git` a task rewrote is refused, and the owner is told.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from ...journal.turns import LoopSettings
from ...tools import git_safe
from ...tools.git_safe import Failed as GitFailed
from ...tools.git_safe import Repo

log = logging.getLogger("pfar.loop")

DIRECTORY = ".worktrees"

__all__ = ["DIRECTORY", "GitFailed", "Made", "branch_of", "finish", "git", "make", "pinned"]


@dataclass(frozen=True, slots=True)
class Made:
    """The settings a task works under from now on, and what the owner should hear."""

    settings: LoopSettings
    notice: str | None


async def git(cwd: str | Path, *args: str, repo: Repo | None = None) -> str:
    """`git args` in `cwd`, safely (`git_safe.run`): its stdout, or GitFailed."""
    return await git_safe.run(Path(cwd), *args, repo=repo)


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
        # nothing of the task ran in it yet: the git dir its .git names is pfar's
        git_dir = await _admin_dir(top, path)
    except GitFailed as exc:
        return _degraded(settings, f"its worktree could not be made ({exc})")
    made = dataclasses.replace(
        settings,
        working_dir=str(path / inside),
        worktree=str(path),
        repository=str(top),
        branch=branch,
        git_dir=str(git_dir),
        git_work_tree=str(path),
    )
    return Made(made, None)


async def _common_dir(top: Path) -> Path:
    common = Path((await git(top, "rev-parse", "--git-common-dir")).strip())
    return (top / common if not common.is_absolute() else common).resolve()


async def _admin_dir(top: Path, path: Path) -> Path:
    """The git dir of worktree `path`: the one its `.git` names, which must be an entry
    of the repository's `worktrees/`."""
    target = git_safe.gitfile_target(path).resolve()
    if target.parent != (await _common_dir(top)) / "worktrees":
        raise GitFailed(f"{path}/.git names {target}, not a worktree of {top}")
    return target


async def pinned(settings: LoopSettings) -> Repo | None:
    """The repository pfar's own git works on for this task: the worktree pinned to the
    git dir pfar made (git_safe.Refused when its `.git` was changed), the repository
    pinned when the task started, or None (no repository). A task journaled before
    pins were kept is pinned now: a worktree from its repository's `worktrees/` entry
    that names it back, anything else by where git finds it."""
    if settings.worktree is not None and settings.repository is not None:
        path = Path(settings.worktree)
        if settings.git_dir:
            return git_safe.worktree_repo(path, Path(settings.git_dir))
        common = await _common_dir(Path(settings.repository))
        admin = common / "worktrees" / path.name
        try:
            back = (admin / "gitdir").read_text().strip()
        except OSError:
            back = ""
        if Path(back) != path / ".git":
            raise git_safe.Refused(f"no git dir of {settings.repository} names {path}")
        return git_safe.worktree_repo(path, admin)
    if settings.git_dir is not None:
        if not settings.git_dir or not settings.git_work_tree:
            return None
        return Repo(Path(settings.git_dir), Path(settings.git_work_tree))
    return await git_safe.pin(Path(settings.working_dir))


async def pin(settings: LoopSettings) -> LoopSettings:
    """Settings with the task's repository pinned (before anything of the task runs)."""
    try:
        repo = await pinned(settings)
    except GitFailed:
        repo = None
    return dataclasses.replace(
        settings,
        git_dir=str(repo.git_dir) if repo else "",
        git_work_tree=str(repo.work_tree) if repo else "",
    )


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
    exclude = await _common_dir(top) / "info" / "exclude"
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


async def _commit(task_id: str, settings: LoopSettings, path: Path, branch: str) -> bool:
    """The worktree's changes committed on its branch (True when there were any), by
    pfar's own git on the pinned git dir; Refused when the worktree's `.git` or HEAD
    was changed to lead anywhere else."""
    repo = await pinned(settings)
    assert repo is not None
    if git_safe.head_branch(repo) != branch:
        raise git_safe.Refused(f"its HEAD no longer names its branch {branch}")
    await git(path, "add", "--all", repo=repo)
    if not (await git(path, "status", "--porcelain", repo=repo)).strip():
        return False
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
        repo=repo,
    )
    return True


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
            committed = await _commit(task_id, settings, path, branch)
        if succeeded or not keep:
            if path.exists():
                await git(top, "worktree", "remove", "--force", str(path))
            where = f"on branch {branch}"
        else:
            where = f"on branch {branch}, worktree kept at {path} for a look"
    except git_safe.Refused as exc:
        log.warning("task %s: pfar ran no git in its worktree: %s", task_id, exc)
        return (
            f"Its worktree {path} (branch {branch}) was left as it is, nothing committed: "
            f"{exc}. Look at it before you run git there yourself."
        )
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
