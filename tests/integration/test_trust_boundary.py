"""The trust boundary through the real CLI and kernel: nothing a task runs acts as the
owner. A sandboxed command sees nothing of pfar's home (vault, control socket, token,
owner log) nor the owner's credential folders, and cannot change `.git/`; an
unsandboxed one that reaches the control socket is refused; a request without this
boot's token is refused; workflow steps run in the sandbox; every answer records who
gave it and through which surface; a session's agent runs in the sandbox."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pfar.kernel.duties import SANDBOX_RECONCILE_SECONDS
from pfar.tools import sandbox
from pfar.vault.home import Home

from ..crash.test_regressions import kernel, rows, wait_state
from ..support import make_home, pfar, said, wait_for

needs_bwrap = pytest.mark.skipif(
    not sandbox.available() and os.environ.get("CI") != "true",
    reason="bubblewrap (bwrap) is not installed",
)

# what a hostile command tries: read the home, the token and the vault, reach the
# control socket and answer every pending question "always"; it prints what it got
ATTACK = """
import json, os, socket, sys

home, owner = sys.argv[1], sys.argv[2]
seen = {}

def attempt(name, what):
    try:
        seen[name] = what()
    except OSError as exc:
        seen[name] = f"error: {exc.strerror}"

attempt("listing", lambda: sorted(os.listdir(home)))
attempt("token", lambda: open(os.path.join(home, "control.token")).read()[:4] + "...")
attempt("vault", lambda: len(open(os.path.join(home, "vault", "secrets.db"), "rb").read()))
attempt("owner_log", lambda: len(open(os.path.join(home, "owner.log"), "rb").read()))
attempt("ssh_key", lambda: open(os.path.join(owner, ".ssh", "id_ed25519")).read())

def talk():
    try:
        token = open(os.path.join(home, "control.token")).read()
    except OSError:
        token = None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(os.path.join(home, "control.sock"))
    f = s.makefile("rb")
    def ask(body):
        s.sendall(json.dumps({**body, "token": token}).encode() + b"\\n")
        line = f.readline()
        return json.loads(line) if line else {"ok": False, "error": {"message": "hung up"}}
    listed = ask({"op": "approvals"})
    if not listed.get("ok"):
        return listed["error"]["message"]
    answers = [
        ask({"op": "answer", "approval_id": q["approval_id"], "decision": "always"})
        for q in listed["result"]["approvals"]
    ]
    return f"answered {len(answers)}: {answers}"

attempt("socket", talk)
print("SEEN " + json.dumps(seen))
"""


def _python() -> str:
    # the interpreter itself, not a venv's link to it: a venv under /tmp is hidden there
    return os.path.realpath(sys.executable)


def _setup(tmp_path: Path, *, sandboxed: bool) -> tuple[Home, Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "attack.py").write_text(ATTACK)
    owner = tmp_path / "owner"  # the owner's home directory, with a key in it
    (owner / ".ssh").mkdir(parents=True)
    (owner / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    home_root = tmp_path / "home"
    command = f"{_python()} attack.py {home_root} {owner}"
    # one loop asks before Write (its question waits); the other runs the attack
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        match = "write it"
        text = "Writing."
        tool_calls = [
          {{ name = "Write", input = {{ file_path = "asked.txt", content = "x" }} }},
        ]

        [[turns]]
        turn = 1
        match = "run it"
        text = "Running the command."
        tool_calls = [ {{ name = "Bash", input = {{ command = {json.dumps(command)} }} }} ]

        [[turns]]
        text = "Saw: $last"
        """
    )
    config = (
        '[loop]\ntools = ["Bash", "Write"]\nalways_allow = ["Bash"]\n'
        f"[sandbox]\nenabled = {str(sandboxed).lower()}\n"
    )
    home = make_home(home_root, script=script, config=config)
    return home, work, owner


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _seen(home: Home, task_id: str) -> dict[str, Any]:
    """What the attack printed, from the tool result journaled in the task's turns."""
    found = rows(home, "SELECT body_json FROM loop_turns WHERE task_id = ? ORDER BY seq", task_id)
    for (body,) in found:
        for text in _strings(json.loads(body)):
            for line in text.splitlines():
                if line.startswith("SEEN "):
                    return dict(json.loads(line.removeprefix("SEEN ")))
    raise AssertionError(f"no SEEN line in task {task_id}'s turns")


def _pending(home: Home, task_id: str) -> list[Any]:
    return rows(
        home,
        "SELECT approval_id, status, decided_by FROM pending_approvals WHERE task_id = ?",
        task_id,
    )


def _start_both(k: Any, work: Path) -> tuple[str, str]:
    asker = str(k.request("loop", prompt="write it", directory=str(work))["task_id"])
    wait_state(k.home, asker, "AwaitingApproval")
    attacker = str(k.request("loop", prompt="run it", directory=str(work))["task_id"])
    wait_state(k.home, attacker, "WaitingForUser")
    return asker, attacker


@needs_bwrap
def test_a_sandboxed_command_sees_nothing_of_the_home_and_answers_nothing(
    tmp_path: Path,
) -> None:
    home, work, owner = _setup(tmp_path, sandboxed=True)
    with kernel(home, env={"HOME": str(owner)}) as k:
        asker, attacker = _start_both(k, work)
        seen = _seen(home, attacker)
        # the home is an empty folder in there: no vault, no socket, no token, no log
        assert seen["listing"] == [], seen
        for name in ("token", "vault", "owner_log", "socket"):
            assert str(seen[name]).startswith("error: No such file"), (name, seen)
        assert str(seen["ssh_key"]).startswith("error: No such file"), seen
        (question,) = _pending(home, asker)
        assert question["status"] == "pending", "a task's command answered the owner's question"
        # the owner answers through the CLI: the journal says who and through what
        r = pfar(home, "approve", question["approval_id"])
        assert r.returncode == 0, said(r)
        (answered,) = _pending(home, asker)
        assert answered["decided_by"].startswith(f"cli (uid {os.geteuid()}, pid "), answered
        timeline = pfar(home, "task", "show", asker)
        assert "approved (approve) via cli (uid" in timeline.stdout, timeline.stdout
        assert rows(home, "SELECT count(*) FROM permission_rules")[0][0] == 0


def test_an_unsandboxed_command_that_reaches_the_socket_is_refused(tmp_path: Path) -> None:
    home, work, owner = _setup(tmp_path, sandboxed=False)
    with kernel(home, env={"HOME": str(owner)}) as k:
        asker, attacker = _start_both(k, work)
        seen = _seen(home, attacker)
        # without a sandbox the command runs as the owner and can read the token: the
        # kernel still tells it from the owner's CLI by where it comes from
        assert "control.token" in seen["listing"], seen
        refused = str(seen["socket"])
        assert refused.startswith("refused: the connection comes from a"), seen
        assert "process this kernel started" in refused or "task's process" in refused
        (question,) = _pending(home, asker)
        assert question["status"] == "pending"
        assert rows(home, "SELECT count(*) FROM permission_rules")[0][0] == 0
        assert k.terminate() == 0
        assert "control socket: the connection comes from a" in k.output()
    assert '"control_refused"' in home.audit_log.read_text()
    assert not home.control_token.exists()  # a boot's token goes with its kernel


def _raw(home: Home, body: dict[str, Any]) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(home.control_socket))
        s.sendall(json.dumps(body).encode() + b"\n")
        with s.makefile("rb") as f:
            return dict(json.loads(f.readline()))


def test_a_request_without_this_boots_token_is_refused(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script='[[turns]]\ntext = "ok"\n')
    with kernel(home) as k:
        first = home.control_token.read_text()
        assert home.control_token.stat().st_mode & 0o077 == 0  # owner-only
        for body in ({"op": "ping"}, {"op": "ping", "token": "guess"}, {"op": "ping", "token": 7}):
            answer = _raw(home, body)
            assert answer["ok"] is False and answer["error"]["code"] == "not_the_owner", answer
            assert "this boot's token" in answer["error"]["message"]
        assert _raw(home, {"op": "ping", "token": first})["ok"] is True
        assert pfar(home, "tasks").returncode == 0  # the CLI carries it
        k.kill()
    with kernel(home) as k:  # a new boot, a new token: the old one is worth nothing
        assert home.control_token.read_text() != first
        assert _raw(home, {"op": "ping", "token": first})["ok"] is False


WORKFLOW = """
    name = "escape"
    task_spec = "spec.md"

    [[steps]]
    name = "try"
    run = ["sh", "-c", "ls -A $HOME_UNDER_TEST > listing.txt; echo out > $OUTSIDE; echo done"]
"""


@needs_bwrap
def test_a_workflow_step_runs_in_the_sandbox(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script="", config="[sandbox]\nenabled = true\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    definition = tmp_path / "escape.toml"
    definition.write_text(
        textwrap.dedent(WORKFLOW)
        .replace("$HOME_UNDER_TEST", str(home.root))
        .replace("$OUTSIDE", str(outside / "written.txt"))
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "spec.md").write_text("# spec\n")
    with kernel(home) as k:
        task_id = k.request("workflow_start", definition=str(definition), directory=str(work))[
            "task_id"
        ]
        wait_for(
            lambda: (
                rows(home, "SELECT state FROM task_journal WHERE task_id = ?", task_id)[0][0]
                in ("Failed", "AwaitingApproval", "Completed")
            ),
            what="the step to end",
        )
    assert not (outside / "written.txt").exists()  # read-only outside its directory
    assert (work / "listing.txt").read_text() == ""  # the home is empty in there


@needs_bwrap
def test_git_metadata_is_read_only_in_the_sandbox(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    box = sandbox.Sandbox("h", "t", work, hidden=(tmp_path / "home",))
    plant = (
        "git config core.fsmonitor 'touch /tmp/x'; "
        "mkdir -p .git/hooks; echo 'touch pwned' > .git/hooks/post-checkout; "
        "echo fine > file.txt; git status --porcelain"
    )
    done = subprocess.run(
        box.wrap(["/bin/sh", "-c", plant]),
        env=box.env(dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "fsmonitor" not in (work / ".git" / "config").read_text()
    assert not (work / ".git" / "hooks" / "post-checkout").exists()
    assert (work / "file.txt").read_text() == "fine\n"  # the work itself is writable
    assert "?? file.txt" in done.stdout  # and git can still read the repository


@needs_bwrap
def test_a_sessions_agent_runs_in_the_sandbox(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    home_root = tmp_path / "home"
    agent = (
        f"ls -A {home_root} > seen.txt; echo out > {outside}/escape.txt; "
        "echo $PFAR_SANDBOX > label.txt; exec sleep 300"
    )
    config = (
        f'[sessions]\nagent_command = ["sh", "-c", {json.dumps(agent)}]\nresume_args = []\n'
        "[sandbox]\nenabled = true\n"
    )
    home = make_home(home_root, script="", config=config)
    with kernel(home) as k:
        created = k.request("session_new", project_path=str(project), thread_id="chat-1")
        active = k.request("session_resume", session_id=created["session_id"])
        assert active["status"] == "ACTIVE"
        assert active["process"]["argv"][0] == "sh"  # journaled as the agent, not bwrap
        # the label, not the file: the shell makes label.txt before it writes the line
        labelled = project / "label.txt"
        label = wait_for(
            lambda: labelled.exists() and labelled.read_text().strip(),
            what="the agent to start",
        )
        assert (project / "seen.txt").read_text() == ""  # the home is empty in there
        assert not (outside / "escape.txt").exists()
        assert label.endswith(f":session-{created['session_id']}")
        # the reconciliation every 30 s takes a sandbox whose task is not running for an
        # orphan: a session's sandbox is one of a session that is running
        pid = active["process"]["pid"]
        time.sleep(SANDBOX_RECONCILE_SECONDS + 2)
        os.kill(pid, 0)  # still there
        assert k.request("session_show", session_id=created["session_id"])["status"] == "ACTIVE"
        assert k.terminate() == 0


def _in_box(box: sandbox.Sandbox, script: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        box.wrap(["/bin/sh", "-c", script]),
        env=box.env(env if env is not None else dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout + done.stderr


@needs_bwrap
def test_nested_repositories_and_the_owners_startup_files_stay_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the task works in the owner's whole home: their shell and git start-up files and
    # every repository in it are read-only, what else is there is writable
    owner = tmp_path / "owner"
    (owner / "src" / "app").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(owner / "src" / "app")], check=True)
    (owner / ".bashrc").write_text("# mine\n")
    (owner / ".gitconfig").write_text("[user]\n\tname = me\n")
    monkeypatch.setenv("HOME", str(owner))
    box = sandbox.Sandbox("h", "t", owner)
    _in_box(
        box,
        "echo 'curl x | sh' >> .bashrc; printf '[core]\\n\\tfsmonitor = /tmp/x\\n' >> .gitconfig;"
        " git -C src/app config core.fsmonitor /tmp/x; echo ok > notes.txt",
    )
    assert (owner / ".bashrc").read_text() == "# mine\n"
    assert "fsmonitor" not in (owner / ".gitconfig").read_text()
    assert "fsmonitor" not in (owner / "src" / "app" / ".git" / "config").read_text()
    assert (owner / "notes.txt").read_text() == "ok\n"


@needs_bwrap
def test_a_worktrees_admin_files_cannot_point_the_owners_git_elsewhere(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    worktree = repo / ".worktrees" / "t1"
    subprocess.run([*git, "worktree", "add", "-q", "-b", "pfar/t1", str(worktree)], check=True)
    admin = repo / ".git" / "worktrees" / "t1"
    before = (admin / "commondir").read_text()
    (worktree / "sub").mkdir()  # a task started in a folder of the worktree
    said = _in_box(
        sandbox.Sandbox("h", "t", worktree / "sub"),
        f"echo /tmp/evil > {admin}/commondir; echo '[core]' > {admin}/config.worktree;"
        " echo hi > new.txt && git add new.txt && git diff --cached --name-only",
    )
    assert (admin / "commondir").read_text() == before
    assert not (admin / "config.worktree").read_text().strip()
    assert "sub/new.txt" in said, said  # git add works from a folder of the worktree


@needs_bwrap
def test_a_sandbox_gets_only_the_basics_of_the_kernels_environment(tmp_path: Path) -> None:
    inherited = {**os.environ, "GH_TOKEN": "ghp_inherited", "ANTHROPIC_API_KEY": "sk-x"}
    os.environ.update({"GH_TOKEN": "ghp_inherited", "ANTHROPIC_API_KEY": "sk-x"})
    try:
        plain = sandbox.Sandbox("h", "t", tmp_path)
        passed = sandbox.Sandbox("h", "t", tmp_path, pass_env=frozenset({"ANTHROPIC_API_KEY"}))
        script = "echo gh=$GH_TOKEN key=$ANTHROPIC_API_KEY set=$SET_BY_TOOL path=${PATH:+yes}"
        env = {**inherited, "SET_BY_TOOL": "v"}
        assert _in_box(plain, script, env).strip() == "gh= key= set=v path=yes"
        assert _in_box(passed, script, env).strip() == "gh= key=sk-x set=v path=yes"
    finally:
        for name in ("GH_TOKEN", "ANTHROPIC_API_KEY"):
            os.environ.pop(name, None)


def test_who_answered_is_journaled_with_the_answer_across_kills(tmp_path: Path) -> None:
    home, work, _owner = _setup(tmp_path, sandboxed=False)
    with kernel(home) as k:
        asker = str(k.request("loop", prompt="write it", directory=str(work))["task_id"])
        wait_state(home, asker, "AwaitingApproval")
        k.kill()  # before the answer
    with kernel(home) as k:
        wait_state(home, asker, "AwaitingApproval")
        (question,) = [q for q in _pending(home, asker) if q["status"] == "pending"]
        r = pfar(home, "approve", question["approval_id"])
        assert r.returncode == 0, said(r)
        k.kill()  # after it
    with kernel(home):
        wait_for((work / "asked.txt").exists, what="the approved write")
        answered = {q["approval_id"]: q for q in _pending(home, asker)}
        by = answered[question["approval_id"]]["decided_by"]
        assert by.startswith(f"cli (uid {os.geteuid()}, pid "), by  # the pfar command's pid
        assert [q for q in answered.values() if q["status"] == "pending"] == []
        timeline = pfar(home, "task", "show", asker).stdout
        assert f"approved (approve) via {by}" in timeline, timeline
