"""A template step whose `[[credentials]]` names a secret the vault lacks asks the owner
for it (a credential prompt, the task AwaitingCredential) instead of failing; the
prompt is re-sent after a SIGKILL before it is answered, and a SIGKILL right after it
is answered loses neither the secret nor the step (which runs once). `pfar secret
list` shows names and times, never values; `pfar secret rm` drops one."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from pfar.vault.home import Home

from ..support import (
    KernelProcess,
    RecordingServer,
    make_home,
    owner_messages,
    pfar,
    running_kernel,
    said,
    task_states,
    wait_for,
)

SECRET = "tok-" + uuid.uuid4().hex


def _home(tmp_path: Path, server: RecordingServer) -> Home:
    return make_home(
        tmp_path / "home",
        templates={
            "sync": f"""
                id = "sync"
                allowed_tools = ["http.request"]

                [[credentials]]
                tool = "http.request"
                host = "{urlsplit(server.url).netloc}"
                headers = {{ Authorization = "Bearer {{{{secret:api_token}}}}" }}
                """
        },
        script=f"""
            [[responses]]
            template = "sync"
            phase = "plan"
            [[responses.json.steps]]
            tool = "http.request"
            args = {{ method = "PUT", url = "{server.url}/items/1", body = "x" }}
            """,
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, said(proc)
    return proc.stdout


def _submit(home: Home) -> str:
    return str(json.loads(_ok(pfar(home, "submit", "sync", "go", "--json")))["task_id"])


def _state(home: Home, task_id: str, state: str) -> None:
    wait_for(lambda: task_states(home).get(task_id) == state, what=f"{task_id} {state}")


def _prompt(home: Home) -> str:
    creds = json.loads(_ok(pfar(home, "approvals", "--json")))["credentials"]
    (prompt,) = creds
    assert prompt["service"] == "api_token"
    return str(prompt["prompt_id"])


def _sent_once_with_the_secret(server: RecordingServer) -> None:
    (put,) = server.writes()
    assert {k.lower(): v for k, v in put["headers"].items()}["authorization"] == (
        f"Bearer {SECRET}"
    )


def _leaked(home: Home) -> list[str]:
    return sorted(
        str(p.relative_to(home.root))
        for p in home.root.rglob("*")
        if p.is_file() and p.name != "secrets.db" and SECRET.encode() in p.read_bytes()
    )


def test_a_missing_secret_is_asked_for_and_the_step_runs_once_given(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    home = _home(tmp_path, http_server)
    with running_kernel(home):
        task_id = _submit(home)
        _state(home, task_id, "AwaitingCredential")
        prompt_id = _prompt(home)
        asked = [m for m in owner_messages(home) if m["kind"] == "credential"]
        assert "needs the secret 'api_token'" in asked[0]["body"]
        assert http_server.requests == []
        given = pfar(home, "credential", prompt_id[:8], stdin=SECRET)
        assert "credential stored" in _ok(given)
        _state(home, task_id, "Completed")
        _sent_once_with_the_secret(http_server)

        listed = json.loads(_ok(pfar(home, "secret", "list", "--json")))
        assert [(s["name"], s["service"]) for s in listed] == [("api_token", "api_token")]
        assert listed[0]["updated_at"]
        assert SECRET not in _ok(pfar(home, "secret", "list"))
        assert "api_token" in _ok(pfar(home, "secret", "list"))
        assert "removed" in _ok(pfar(home, "secret", "rm", "api_token"))
        assert json.loads(_ok(pfar(home, "secret", "list", "--json"))) == []
        gone = pfar(home, "secret", "rm", "api_token")
        assert gone.returncode == 1 and "no secret named 'api_token'" in said(gone)

        # removed: the next task that needs it asks again
        again = _submit(home)
        _state(home, again, "AwaitingCredential")
    assert _leaked(home) == []


def test_secret_list_and_rm_without_a_kernel(tmp_path: Path, http_server: RecordingServer) -> None:
    home = _home(tmp_path, http_server)
    _ok(pfar(home, "secret", "set", "api_token", stdin=SECRET))
    listed = _ok(pfar(home, "secret", "list"))
    assert "api_token" in listed and SECRET not in listed
    _ok(pfar(home, "secret", "rm", "api_token"))
    assert "0 secret(s)" in _ok(pfar(home, "secret", "list"))


def test_killed_before_the_credential_is_given_the_prompt_is_sent_again(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    home = _home(tmp_path, http_server)
    k = KernelProcess(home, fault="credential_parked")
    k.wait_ready()
    task_id = _submit(home)
    assert k.killed_by_fault(), k.output()
    assert task_states(home)[task_id] == "AwaitingCredential"
    with running_kernel(home):
        prompt_id = _prompt(home)
        wait_for(
            lambda: any(m["key"] == f"credential:{prompt_id}:1" for m in owner_messages(home)),
            what="the re-sent credential prompt",
        )
        assert http_server.requests == []
        _ok(pfar(home, "credential", prompt_id[:8], stdin=SECRET))
        _state(home, task_id, "Completed")
    _sent_once_with_the_secret(http_server)
    assert _leaked(home) == []


def test_killed_right_after_the_credential_is_given_the_step_runs_once(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    home = _home(tmp_path, http_server)
    with running_kernel(home):
        task_id = _submit(home)
        _state(home, task_id, "AwaitingCredential")
        prompt_id = _prompt(home)
    k = KernelProcess(home, fault="credential_received")
    k.wait_ready()
    pfar(home, "credential", prompt_id[:8], stdin=SECRET)  # the kernel dies answering
    assert k.killed_by_fault(), k.output()
    with running_kernel(home):
        _state(home, task_id, "Completed")
        assert json.loads(_ok(pfar(home, "approvals", "--json")))["credentials"] == []
    _sent_once_with_the_secret(http_server)
    assert _leaked(home) == []
