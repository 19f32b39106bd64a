"""The console over HTTP, against a real kernel process: who gets in, what a form may
do once, and what the operator API over HTTP answers to bad input."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from pfar.config import Config
from pfar.errors import ConfigError

from ..console_support import console_home, console_url, csrf_of, logged_in, owner_token, serving
from ..support import make_home, pending_approvals, pfar, running_kernel, wait_for

BEARER = "authorization"


def _asked(home: object, client: httpx.Client) -> str:
    """Submit a task that asks first; its question's id, once it asks."""
    submitted = pfar(home, "submit", "run_command", "echo hello")  # type: ignore[arg-type]
    assert submitted.returncode == 0, submitted.stderr
    found = wait_for(lambda: pending_approvals(home), what="the question")  # type: ignore[arg-type]
    return str(found[0].approval_id)


def test_only_the_owner_gets_in_and_a_rotated_token_ends_every_session(tmp_path: Path) -> None:
    home = console_home(tmp_path / "home")
    with serving(home):
        url = console_url(home)
        anonymous = httpx.Client(base_url=url, follow_redirects=False)
        page = anonymous.get("/")
        assert (page.status_code, page.headers["location"]) == (303, "/login")
        assert anonymous.post("/tasks/x/cancel", data={"csrf": "x"}).status_code == 401
        wrong = anonymous.post("/login", data={"token": "not-the-token"})
        assert wrong.status_code == 401 and "not the owner token" in wrong.text
        assert anonymous.post("/login", data={"other": "1"}).status_code == 401  # no token
        assert anonymous.post("/login", content=b"token=x").status_code == 400  # not a form
        token = owner_token(home)
        cross = anonymous.post("/login", data={"token": token}, headers={"origin": "http://evil"})
        assert cross.status_code == 403 and "pfar_session" not in cross.headers.get(
            "set-cookie", ""
        )
        assert token not in wrong.text + cross.text  # never shown back

        client = logged_in(home)
        cookie = client.cookies["pfar_session"]
        flags = [c.lower() for c in _set_cookie(anonymous, token)]
        assert {"httponly", "samesite=strict", "path=/"} <= set(flags)
        assert client.get("/").status_code == 200
        assert client.get("/tasks").status_code == 200
        kernel = client.get("/kernel")
        assert kernel.status_code == 200 and "No chat channel is enabled" in kernel.text
        assert "Model providers" in kernel.text and "<td>scripted</td>" in kernel.text
        assert client.get("/tasks?state=Done").status_code == 400  # not a state: named

        rotated = pfar(home, "console", "token", "--rotate")
        assert rotated.returncode == 0 and rotated.stdout.strip() != token
        stale = httpx.Client(base_url=url, cookies={"pfar_session": cookie})
        assert stale.get("/", follow_redirects=False).status_code == 303  # logged out
        forged = httpx.Client(base_url=url, cookies={"pfar_session": cookie[:-2] + "xx"})
        assert forged.get("/", follow_redirects=False).status_code == 303


def _set_cookie(client: httpx.Client, token: str) -> list[str]:
    answer = client.post("/login", data={"token": token})
    return [part.strip() for part in answer.headers["set-cookie"].split(";")]


def test_an_answer_is_taken_once_and_a_replayed_or_cross_site_form_is_refused(
    tmp_path: Path,
) -> None:
    home = console_home(tmp_path / "home")
    with serving(home):
        client = logged_in(home)
        approval_id = _asked(home, client)
        page = client.get("/").text
        assert approval_id in page and "echo hello" in page  # the whole action it allows
        csrf = csrf_of(page[page.index(f'action="/questions/{approval_id}"') :])
        form = {"csrf": csrf, "decision": "approve"}
        cross = client.post(
            f"/questions/{approval_id}", data=form, headers={"sec-fetch-site": "cross-site"}
        )
        assert cross.status_code == 403  # refused before the form was spent
        answered = client.post(f"/questions/{approval_id}", data=form)
        assert answered.status_code == 303 and "approve" in answered.headers["location"]
        replayed = client.post(f"/questions/{approval_id}", data=form)
        assert replayed.status_code == 403 and "sent already" in replayed.text
        (decided,) = [a for a in _approvals(home) if a["approval_id"] == approval_id]
        shown = client.get(f"/tasks/{decided['task_id'][:8]}").text  # a prefix will do
        assert "As trace.md" in shown and "&#34;task_id&#34;" in shown  # the record, escaped
        assert re.fullmatch(r"console \(session [0-9a-f]{8}\)", decided["decided_by"])

        # a question answered in the CLI first: the console says so, and changes nothing
        second = _asked(home, client)
        csrf = csrf_of(client.get("/").text.split(f'action="/questions/{second}"')[1])
        assert pfar(home, "deny", second).returncode == 0
        late = client.post(f"/questions/{second}", data={"csrf": csrf, "decision": "approve"})
        shown = client.get(late.headers["location"]).text
        assert "answered already" in shown and "nothing was changed" in shown
        (denied,) = [a for a in _approvals(home) if a["approval_id"] == second]
        assert denied["decision"] == "deny" and denied["decided_by"].startswith("cli")


def _approvals(home: object) -> list[dict[str, str]]:
    import json

    listed = pfar(home, "approvals", "--all", "--json")  # type: ignore[arg-type]
    return list(json.loads(listed.stdout)["approvals"])


def test_the_http_api_answers_bad_input_by_name_and_changes_nothing(tmp_path: Path) -> None:
    home = console_home(tmp_path / "home")
    with serving(home):
        api = httpx.Client(base_url=console_url(home), timeout=20)
        owner = {BEARER: f"Bearer {owner_token(home)}"}

        def call(op: str, body: object = None, **kw: object) -> tuple[int, dict[str, object]]:
            answer = api.post(f"/api/{op}", json=body if body is not None else {}, **kw)  # type: ignore[arg-type]
            return answer.status_code, answer.json()

        status, listed = call("tasks", headers=owner)
        assert (status, listed) == (200, {"ok": True, "result": []})
        assert call("tasks", headers={BEARER: "Bearer wrong"})[0] == 401
        assert call("tasks")[0] == 401  # no session, no token
        status, refused = call("launch", headers=owner)
        assert status == 404 and "unknown op 'launch'" in str(refused)
        assert call("shutdown", headers=owner)[0] == 404  # the kernel's own process's op
        status, refused = call("task_show", {"task_id": "0badc0de"}, headers=owner)
        assert status == 404 and refused["error"] == {
            "code": "unknown_task",
            "message": "no task with id '0badc0de'; `pfar tasks` lists them",
        }
        status, refused = call(
            "answer", {"approval_id": "0badc0de", "decision": "approve"}, headers=owner
        )
        assert (status, refused["error"]["code"]) == (404, "unknown_approval")  # type: ignore[index]
        status, refused = call("tasks", {"limit": "ten"}, headers=owner)
        assert (status, refused["error"]["message"]) == (400, "limit: must be an integer, not str")  # type: ignore[index]
        malformed = api.post("/api/tasks", content=b'{"limit": 1', headers=owner)
        assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "bad_request"
        listed_json = api.post("/api/tasks", content=b"[1, 2]", headers=owner)
        assert listed_json.status_code == 400 and "a JSON object" in listed_json.text
        huge = api.post(
            "/api/submit", content=b'{"text": "' + b"x" * (1 << 17) + b'"}', headers=owner
        )
        assert huge.status_code == 400 and huge.json()["error"]["code"] == "too_large"
        assert call("tasks", headers=owner)[1] == {"ok": True, "result": []}  # nothing was made

        document = api.get("/openapi.json").json()
        assert document["openapi"].startswith("3.1")
        assert "/api/task_show" in document["paths"] and "/api/shutdown" not in document["paths"]
        refs = set(
            re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', str(document).replace("'", '"'))
        )
        assert refs and refs <= set(document["components"]["schemas"])


def test_a_console_beyond_loopback_without_tls_is_refused_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[console]\nhost = "0.0.0.0"\n')
    config.chmod(0o600)
    with pytest.raises(ConfigError) as refused:
        Config.load(config)
    assert "console" in str(refused.value) and "tls_certificate" in str(refused.value)
    config.write_text('[console]\nhost = "0.0.0.0"\nallow_plain_http_beyond_loopback = true\n')
    assert not Config.load(config).console.loopback


def test_a_console_port_already_taken_leaves_the_kernel_running_without_one(
    tmp_path: Path,
) -> None:
    first = console_home(tmp_path / "first")
    with serving(first):
        port = console_url(first).rsplit(":", 1)[1].rstrip("/")
        second = make_home(tmp_path / "second", config=f"[console]\nport = {port}\n", examples=True)
        with running_kernel(second) as kernel:
            shown = pfar(second, "console", "--no-open")
            assert shown.returncode == 1 and "runs without its console" in shown.stderr
            submitted = pfar(second, "submit", "note", "still here", "--wait")
            assert submitted.returncode == 0, submitted.stderr  # the kernel works on
            assert "cannot listen" in kernel.output()
        assert console_url(first)  # the first one's console is untouched


def test_a_failed_task_that_may_be_retried_offers_retry_and_only_it_does(
    tmp_path: Path,
) -> None:
    home = console_home(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    script = home.root / "scripts" / "default.toml"
    script.write_text('[[turns]]\nerror = "the provider is overloaded"\n')
    with serving(home):
        client = logged_in(home)
        started = pfar(home, "loop", "say hello", "--dir", str(work), "--once", "--wait")
        assert started.returncode == 3, started.stdout + started.stderr  # it failed
        task_id = started.stdout.split()[1]
        page = client.get(f"/tasks/{task_id}").text
        assert f'action="/tasks/{task_id}/retry"' in page
        script.write_text('[[turns]]\ntext = "Hello."\n')
        csrf = csrf_of(page[page.index(f'action="/tasks/{task_id}/retry"') :])
        retried = client.post(f"/tasks/{task_id}/retry", data={"csrf": csrf})
        assert retried.status_code == 303, retried.text
        shown = client.get(retried.headers["location"]).text
        assert "retried (retry 1)" in shown
        wait_for(lambda: "Completed" in pfar(home, "task", "show", task_id).stdout)
        page = client.get(f"/tasks/{task_id}").text
        assert f'action="/tasks/{task_id}/retry"' not in page  # Completed: nothing to retry
        assert "retried (retry 1, Executing)" in page and "by <strong>console</strong>" in page
