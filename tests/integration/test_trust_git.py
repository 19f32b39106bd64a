"""pfar's own git runs nothing a task planted: a loop task's Bash sets `core.fsmonitor`,
hooks, `core.hooksPath` or a filter driver in its repository, or rewrites its worktree's
`.git` file to point at a git dir it made; the task is taken up again after a restart
(pfar's `git status` for the system prompt) and ended with /done (pfar's `git add` and
`git commit`): none of the planted programs ever runs, and a rewritten `.git` is refused
with a word to the owner."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from pfar.journal import TaskState
from pfar.journal.turns import LoopSettings
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.tools import git_safe, sandbox

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


def _script(path: Path, marker: Path) -> Path:
    """A program that leaves `marker` behind if anything runs it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> {shlex.quote(str(marker))}\ncat\n')
    path.chmod(0o755)
    return path


def _sandboxed() -> bool:
    if sandbox.available():
        return True
    if os.environ.get("CI") == "true":
        raise RuntimeError("bubblewrap (bwrap) is not installed, and CI=true tests sandboxes")
    return False


class Outcome:
    def __init__(self, state: TaskState, bodies: list[str], settings: LoopSettings, prompt: str):
        self.state, self.bodies, self.settings, self.system_prompt = state, bodies, settings, prompt


def _take_up_twice(
    tmp_path: Path, directory: Path, command: str, *, worktree: bool, sandboxed: bool = False
) -> Outcome:
    """A loop task whose first tool call runs `command`; then the kernel is restarted,
    the owner says "carry on" (the task is taken up again: pfar's `git status`), and
    "/done" (with a worktree: pfar's `git add` and `git commit`)."""
    prompts: list[str] = []

    def model(request: ChatRequest) -> ChatResponse:
        prompts.append(request.system)
        if not any(m.role == "assistant" for m in request.messages):
            return reply(request, "", [ToolCall("b", "Bash", {"command": command})])
        return reply(request, "ok")

    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n'
    if sandboxed:
        config += "[sandbox]\nenabled = true\n"
    home = make_home(tmp_path / "home", config=config)

    async def first() -> str:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("plant", str(directory), worktree=worktree)
            await op.wait_idle()
            turns = await op.journal.loops.turns(started.task_id)
            assert len(turns) >= 3, turns  # the command ran and the model answered
            return started.task_id

    async def second(task_id: str) -> Outcome:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            await op.send(task_id, "carry on")
            await op.wait_idle()
            await op.send(task_id, "/done")
            await op.wait_idle()
            bodies = [m["body"] for m in await op.journal.events.for_task(task_id)]
            settings = await op.journal.loops.settings(task_id)
            return Outcome((await op.task(task_id)).state, bodies, settings, prompts[-1])

    task_id = asyncio.run(first())
    return asyncio.run(second(task_id))


_PLANTS = {
    # the repository's config names an fsmonitor hook: `git status` and `git add` run it
    "fsmonitor": 'git config core.fsmonitor "$S"',
    # hooks in the repository's hooks/ (a worktree's are its common dir's)
    "hooks": (
        'H="$(git rev-parse --git-common-dir)/hooks"; mkdir -p "$H"; for h in pre-commit '
        "prepare-commit-msg commit-msg post-commit post-checkout reference-transaction "
        'post-index-change; do cp "$S" "$H/$h"; done'
    ),
    "hooksPath": (
        'mkdir -p "$T/myhooks"; for h in post-commit reference-transaction '
        'post-index-change; do cp "$S" "$T/myhooks/$h"; done; '
        'git config core.hooksPath "$T/myhooks"'
    ),
    # a filter the working tree's .gitattributes names: `git add` runs its clean command
    "filter": (
        "echo '* filter=evil diff=evil' > .gitattributes; "
        'git config filter.evil.clean "$S"; git config filter.evil.process "$S"; '
        'git config diff.evil.textconv "$S"'
    ),
}


@pytest.mark.parametrize("plant", sorted(_PLANTS))
def test_a_worktree_tasks_planted_git_programs_never_run(tmp_path: Path, plant: str) -> None:
    repo = _repo(tmp_path / "repo")
    marker = tmp_path / "marker"
    script = _script(tmp_path / "planted" / "run.sh", marker)
    where = f"S={shlex.quote(str(script))}; T={shlex.quote(str(tmp_path))}"
    command = f"{where}; {_PLANTS[plant]}; echo changed >> README"
    outcome = _take_up_twice(tmp_path, repo, command, worktree=True)
    assert not marker.exists(), marker.read_text()
    assert outcome.state is TaskState.Completed
    assert "Git: branch pfar/" in outcome.system_prompt
    (finished,) = [b for b in outcome.bodies if "finished" in b]
    branch = outcome.settings.branch
    assert branch is not None and f"merge {branch}" in finished  # the work is committed
    assert "pfar task" in _git(repo, "log", "-1", "--format=%s", branch)


def test_a_plain_tasks_planted_fsmonitor_never_runs(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    marker = tmp_path / "marker"
    script = _script(tmp_path / "planted" / "run.sh", marker)
    command = f"git config core.fsmonitor {shlex.quote(str(script))}; echo x > new.txt"
    outcome = _take_up_twice(tmp_path, repo, command, worktree=False)
    assert not marker.exists(), marker.read_text()
    assert "Git: branch main, dirty (1 changed file)" in outcome.system_prompt
    assert outcome.settings.git_dir == str(repo / ".git")


def test_a_repository_made_after_the_task_started_is_not_looked_at(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    marker = tmp_path / "marker"
    script = _script(tmp_path / "planted" / "run.sh", marker)
    command = (
        f"git init -q . && touch f && git add f && "
        f"git config core.fsmonitor {shlex.quote(str(script))}"
    )
    outcome = _take_up_twice(tmp_path, plain, command, worktree=False)
    assert not marker.exists(), marker.read_text()
    assert "Git: not a git repository" in outcome.system_prompt
    assert outcome.settings.git_dir == ""  # pinned: no repository when it started


# The command writes a script that leaves the marker, makes a git dir of its own (its
# config names the script as fsmonitor hook, its hooks/ hold it) and points the
# worktree's .git file at it. Inside a sandbox only the worktree is writable (and /tmp is
# its own), so all of it is made in the worktree.
_REWRITE = (
    "printf '#!/bin/sh\\necho \"$0\" >> %s\\ncat\\n' {marker} > run.sh && chmod +x run.sh && "
    "git init -q evil && git --git-dir=evil/.git --work-tree=. add README && "
    "for h in post-commit reference-transaction post-index-change pre-commit; "
    "do cp run.sh evil/.git/hooks/$h; done && "
    'git --git-dir=evil/.git config core.fsmonitor "$PWD/run.sh" && '
    "printf 'gitdir: %s\\n' \"$PWD/evil/.git\" > .git && echo changed >> README"
)


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
def test_a_rewritten_worktree_git_file_is_refused(tmp_path: Path, sandboxed: bool) -> None:
    if sandboxed and not _sandboxed():
        pytest.skip("bubblewrap (bwrap) is not installed")
    repo = _repo(tmp_path / "repo")
    marker = tmp_path / "marker"
    command = _REWRITE.format(marker=shlex.quote(str(marker)))
    outcome = _take_up_twice(tmp_path, repo, command, worktree=True, sandboxed=sandboxed)
    assert not marker.exists(), marker.read_text()
    assert outcome.state is TaskState.Completed
    worktree = outcome.settings.worktree
    assert worktree is not None
    assert Path(worktree, ".git").read_text() == f"gitdir: {worktree}/evil/.git\n"
    assert "Git: not looked at" in outcome.system_prompt
    (finished,) = [b for b in outcome.bodies if "finished" in b]
    assert "was left as it is, nothing committed" in finished
    assert "was changed to point at" in finished
    assert Path(worktree).exists()  # left for the owner to look at


def _git_add_in(box: sandbox.Sandbox, binds: tuple[git_safe.Bind, ...], hooks: Path) -> str:
    """`git add` and `git diff --cached` in the sandbox, with `binds` added to it."""
    argv = box.wrap(
        [
            "/bin/sh",
            "-c",
            "echo hi > new.txt && git add new.txt 2>&1 && "
            "git diff --cached --name-only 2>&1; git commit -qm x 2>&1; "
            f"echo hook > {hooks}/post-commit 2>&1; true",
        ]
    )
    extra = [
        a
        for b in binds
        for a in ("--bind" if b.writable else "--ro-bind", str(b.path), str(b.path))
    ]
    cut = argv.index("--")
    return subprocess.run(
        [*argv[:cut], *extra, *argv[cut:]],
        env=box.env(dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout


def test_the_binds_for_a_worktree_let_git_add_work_in_a_sandbox_and_nothing_more(
    tmp_path: Path,
) -> None:
    if not _sandboxed():
        pytest.skip("bubblewrap (bwrap) is not installed")
    repo = _repo(tmp_path / "repo")
    worktree = repo / ".worktrees" / "t"
    _git(repo, "worktree", "add", "--quiet", "-b", "pfar/t", str(worktree))
    git_dir = repo / ".git" / "worktrees" / "t"
    binds = git_safe.sandbox_binds(worktree, git_dir)
    assert [(b.path, b.writable) for b in binds] == [
        (repo / ".git", False),
        (git_dir, True),
        (repo / ".git" / "objects", True),
        (repo / ".git" / "objects" / "pack", False),
        (repo / ".git" / "objects" / "info", False),
    ]
    box = sandbox.Sandbox("h", "t", worktree)
    out = _git_add_in(box, binds, repo / ".git" / "hooks")
    assert "new.txt" in out.splitlines()  # staged: the index and its objects were written
    assert "cannot lock ref" in out  # a commit cannot move the branch
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert _git(worktree, "diff", "--cached", "--name-only") == "new.txt\n"
    # a .git pointed elsewhere gets no binds at all
    (worktree / ".git").write_text(f"gitdir: {tmp_path}\n")
    assert git_safe.sandbox_binds(worktree, git_dir) == ()


def test_git_add_in_a_sandboxed_worktree_task(tmp_path: Path) -> None:
    if not _sandboxed():
        pytest.skip("bubblewrap (bwrap) is not installed")
    repo = _repo(tmp_path / "repo")
    command = "echo hi > new.txt && git add new.txt && git diff --cached --name-only"
    said: list[str] = []

    def model(request: ChatRequest) -> ChatResponse:
        if not any(m.role == "assistant" for m in request.messages):
            return reply(request, "", [ToolCall("b", "Bash", {"command": command})])
        said.append(request.messages[-1].tool_results[0].content)
        return reply(request, "staged")

    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n[sandbox]\nenabled = true\n'
    home = make_home(tmp_path / "home", config=config)

    async def main() -> LoopSettings:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("stage", str(repo), worktree=True)
            await op.wait_idle()
            return await op.journal.loops.settings(started.task_id)

    settings = asyncio.run(main())
    assert settings.worktree is not None
    assert "index.lock" not in said[0] and "new.txt" in said[0], said[0]
    assert _git(Path(settings.worktree), "diff", "--cached", "--name-only") == "new.txt\n"


def test_a_worktree_whose_head_was_moved_to_another_branch_is_not_committed(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path / "repo")
    command = "git checkout -q --ignore-other-worktrees main && echo changed >> README"
    outcome = _take_up_twice(tmp_path, repo, command, worktree=True)
    assert _git(repo, "log", "--format=%s", "main") == "first\n"  # the owner's branch
    (finished,) = [b for b in outcome.bodies if "finished" in b]
    assert "nothing committed: its HEAD no longer names its branch" in finished
