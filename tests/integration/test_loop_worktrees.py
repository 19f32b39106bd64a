"""A loop task in its own git worktree, with a real repository and real git: its edits
land on its branch, never in the owner's checkout; at the end they are committed and
the owner is told how to merge; a directory outside any repository runs degraded."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pfar.journal import TaskState
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply

from ..support import make_home

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True, check=False).returncode != 0,
    reason="git is not installed",
)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def _repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "--quiet", "--initial-branch=main")
    _git(path, "config", "user.email", "owner@example.com")
    _git(path, "config", "user.name", "Owner")
    (path / "README").write_text("hello\n")
    _git(path, "add", "README")
    _git(path, "commit", "--quiet", "-m", "first")
    return path


def _writer(request: ChatRequest) -> ChatResponse:
    if not any(m.role == "assistant" for m in request.messages):
        call = ToolCall("w", "file.write", {"path": "new.txt", "content": "from the task"})
        return reply(request, "", [call])
    return reply(request, "I wrote new.txt.")


async def _run(
    tmp_path: Path,
    directory: Path,
    body: Callable[[Operator, str], Any],
    *,
    handler: Callable[[ChatRequest], ChatResponse] = _writer,
    extra: str = "",
) -> Any:
    config = f'[loop]\ntools = ["file.read", "file.write"]\nalways_allow = ["file.write"]\n{extra}'
    home = make_home(tmp_path / "home", config=config)
    async with open_kernel(home, model=ScriptedChatModel(handler)) as kernel:
        op = Operator(kernel)
        started = await op.start_loop("write a file", str(directory), worktree=True)
        await op.wait_idle()
        return await body(op, started.task_id)


async def _owner_bodies(op: Operator, task_id: str) -> list[str]:
    return [m["body"] for m in await op.journal.events.for_task(task_id)]


def test_a_task_works_on_its_own_branch_and_the_owner_is_offered_the_merge(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path / "repo")

    async def body(op: Operator, task_id: str) -> None:
        settings = await op.journal.loops.settings(task_id)
        worktree = repo / ".worktrees" / task_id
        assert settings.worktree == str(worktree)
        assert settings.working_dir == str(worktree)
        assert settings.branch == f"pfar/{task_id[:8]}"
        assert (worktree / "new.txt").read_text() == "from the task"
        assert not (repo / "new.txt").exists()  # the owner's checkout is untouched
        assert _git(repo, "status", "--porcelain") == ""  # .worktrees/ is excluded
        await op.send(task_id, "/done")
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.Completed
        assert not worktree.exists()  # removed; the branch holds the work
        shown = _git(repo, "show", f"pfar/{task_id[:8]}:new.txt")
        assert shown == "from the task"
        assert "pfar task" in _git(repo, "log", "-1", "--format=%s", f"pfar/{task_id[:8]}")
        (finished,) = [b for b in await _owner_bodies(op, task_id) if "finished" in b]
        assert f"git -C {repo} merge pfar/{task_id[:8]}" in finished
        _git(repo, "merge", "--quiet", f"pfar/{task_id[:8]}")
        assert (repo / "new.txt").read_text() == "from the task"

    asyncio.run(_run(tmp_path, repo, body))


def test_a_subdirectory_of_the_repository_maps_into_the_worktree(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "keep").write_text("")
    _git(repo, "add", "pkg/keep")
    _git(repo, "commit", "--quiet", "-m", "pkg")

    async def body(op: Operator, task_id: str) -> None:
        settings = await op.journal.loops.settings(task_id)
        assert settings.working_dir == str(repo / ".worktrees" / task_id / "pkg")
        assert (repo / ".worktrees" / task_id / "pkg" / "new.txt").exists()

    asyncio.run(_run(tmp_path, repo / "pkg", body))


def test_outside_a_repository_the_task_runs_degraded_and_the_owner_is_told(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()

    async def body(op: Operator, task_id: str) -> None:
        settings = await op.journal.loops.settings(task_id)
        assert settings.worktree is None
        assert settings.worktree_error is not None
        assert "not in a git repository" in settings.worktree_error
        assert (plain / "new.txt").read_text() == "from the task"
        bodies = await _owner_bodies(op, task_id)
        assert any("not in a worktree" in b for b in bodies)

    asyncio.run(_run(tmp_path, plain, body))


def test_a_cancelled_task_keeps_its_worktree_for_a_look_or_removes_it(tmp_path: Path) -> None:
    def asks(request: ChatRequest) -> ChatResponse:  # its second write waits on permission
        if not any(m.role == "assistant" for m in request.messages):
            return reply(
                request,
                "",
                [
                    ToolCall("w", "file.write", {"path": "a.txt", "content": "a"}),
                    ToolCall("r", "file.read", {"path": "a.txt"}),
                ],
            )
        return reply(request, "done")

    for keep in (True, False):
        repo = _repo(tmp_path / f"repo-{keep}")

        async def body(op: Operator, task_id: str, repo: Path = repo, keep: bool = keep) -> None:
            assert (await op.task(task_id)).state is TaskState.AwaitingApproval
            await op.cancel(task_id)
            worktree = repo / ".worktrees" / task_id
            assert worktree.exists() is keep
            # its work is committed on its branch either way
            assert _git(repo, "show", f"pfar/{task_id[:8]}:a.txt") == "a"

        asyncio.run(
            _run(
                tmp_path / f"k-{keep}",
                repo,
                body,
                handler=asks,
                extra=f"keep_failed_worktrees = {'true' if keep else 'false'}\n",
            )
        )


def test_a_task_that_changed_nothing_leaves_no_branch_behind(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")

    def talker(request: ChatRequest) -> ChatResponse:
        return reply(request, "Nothing to change.")

    async def body(op: Operator, task_id: str) -> None:
        await op.send(task_id, "/done")
        await op.wait_idle()
        assert (await op.task(task_id)).state is TaskState.Completed
        assert f"pfar/{task_id[:8]}" not in _git(repo, "branch", "--list")
        assert not (repo / ".worktrees" / task_id).exists()
        (finished,) = [b for b in await _owner_bodies(op, task_id) if "finished" in b]
        assert "It changed nothing in the repository; its branch is removed." in finished

    asyncio.run(_run(tmp_path, repo, body, handler=talker))
