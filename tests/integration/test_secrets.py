"""Secrets go only where a template's author sends them, through the real CLI and kernel.

A task's text, a model's plan and a tool's result are data: a `{{secret:NAME}}`
written there is never expanded. A template's `[[credentials]]` is the one place a
secret is put into a tool call: an http.request header for one host, or a
shell.run command's environment or stdin, never its command line.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import subprocess
import sys
import textwrap
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from pfar.vault.home import Home

from ..support import (
    RecordingServer,
    make_home,
    owner_messages,
    pfar,
    running_kernel,
    vault_db,
    wait_for,
)

SECRET = "tok-" + uuid.uuid4().hex  # long and unique: grep finds it anywhere it leaked


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def submit_and_wait(home: Home, template: str, text: str) -> dict[str, object]:
    r = pfar(home, "submit", template, text, "--wait", "--json")
    done = json.loads(r.stdout)
    assert isinstance(done, dict), r.stdout + r.stderr
    # --wait exits 3 for a task that failed (some here fail on purpose)
    assert r.returncode == (3 if done["state"] == "Failed" else 0), r.stdout + r.stderr
    return done


def leaked(home: Home) -> list[str]:
    """Every file of the home (vault, logs, workspaces) whose bytes hold the secret,
    secrets.db excepted: that is where it belongs."""
    return sorted(
        str(p.relative_to(home.root))
        for p in home.root.rglob("*")
        if p.is_file() and p.name != "secrets.db" and SECRET.encode() in p.read_bytes()
    )


@pytest.fixture
def other_server() -> object:
    server = RecordingServer()
    yield server
    server.close()


def test_a_reference_in_task_text_is_kept_as_text_never_expanded(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    with running_kernel(home):
        ok(pfar(home, "secret", "set", "api_token", stdin=SECRET + "\n"))
        done = submit_and_wait(home, "note", "remember {{secret:api_token}} please")
        assert done["state"] == "Completed", done
        note = home.workspace(str(done["task_id"])) / "note.md"
        assert note.read_text() == "remember {{secret:api_token}} please\n"
    assert leaked(home) == []


def test_a_plan_that_puts_the_input_into_a_request_sends_no_secret(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    # the plan is the model's: here it copies the task's text into the URL and the body
    home = make_home(
        tmp_path / "home",
        templates={
            "fetch": """
                id = "fetch"
                allowed_tools = ["http.request"]
                """
        },
        script=f"""
            [[responses]]
            template = "fetch"
            phase = "plan"
            [[responses.json.steps]]
            tool = "http.request"
            args = {{ method = "PUT", url = "{http_server.url}/q?$input", body = "$input" }}
            """,
    )
    with running_kernel(home):
        ok(pfar(home, "secret", "set", "api_token", stdin=SECRET))
        done = submit_and_wait(home, "fetch", "k={{secret:api_token}}")
        assert done["state"] == "Completed", done
    (put,) = http_server.writes()
    assert SECRET not in json.dumps(put)
    assert put["body"] == "k={{secret:api_token}}"
    assert leaked(home) == []


def test_a_template_credential_goes_to_its_host_only(
    tmp_path: Path, http_server: RecordingServer, other_server: RecordingServer
) -> None:
    host = urlsplit(http_server.url).netloc
    home = make_home(
        tmp_path / "home",
        templates={
            "sync": f"""
                id = "sync"
                allowed_tools = ["http.request"]

                [[credentials]]
                tool = "http.request"
                host = "{host}"
                headers = {{ Authorization = "Bearer {{{{secret:api_token}}}}" }}
                """
        },
        # the plan also names the header itself, with a reference: the template's wins
        script=f"""
            [[responses]]
            template = "sync"
            phase = "plan"
            [[responses.json.steps]]
            tool = "http.request"
            args = {{ url = "{http_server.url}/mine", headers = {{ authorization = "x" }} }}
            [[responses.json.steps]]
            tool = "http.request"
            args = {{ url = "{other_server.url}/theirs" }}
            """,
    )
    with running_kernel(home):
        ok(pfar(home, "secret", "set", "api_token", stdin=SECRET))
        done = submit_and_wait(home, "sync", "go")
        assert done["state"] == "Completed", done
    (mine,) = http_server.requests
    (theirs,) = other_server.requests
    auth = {k.lower(): v for k, v in mine["headers"].items()}["authorization"]
    assert auth == f"Bearer {SECRET}"
    assert SECRET not in json.dumps(theirs)
    assert "authorization" not in {k.lower() for k in theirs["headers"]}
    assert leaked(home) == []


def test_a_shell_credential_reaches_env_and_stdin_never_the_command_line(
    tmp_path: Path,
) -> None:
    # the command records every command line on the machine while it runs (what `ps`
    # shows any local user) and the digest of what it got through env and stdin
    probe = textwrap.dedent(
        """
        import glob, hashlib, os, sys
        lines = []
        for path in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                lines.append(open(path, "rb").read().replace(b"\\0", b" ").decode())
            except OSError:
                pass
        open("ps.txt", "w").write("\\n".join(lines))
        got = os.environ["API_TOKEN"] + "|" + sys.stdin.read()
        print(hashlib.sha256(got.encode()).hexdigest())
        """
    )
    argv = json.dumps([sys.executable, "-c", probe, "{{secret:api_token}}"])
    home = make_home(
        tmp_path / "home",
        templates={
            "deploy": """
                id = "deploy"
                allowed_tools = ["shell.run"]

                [[credentials]]
                tool = "shell.run"
                env = { API_TOKEN = "{{secret:api_token}}" }
                stdin = "{{secret:api_token}}"
                """
        },
        script=f"""
            [[responses]]
            template = "deploy"
            phase = "plan"
            [[responses.json.steps]]
            tool = "shell.run"
            args = {{ argv = {argv} }}
            [[responses]]
            template = "deploy"
            phase = "synthesize"
            text = "$step0"
            """,
    )
    with running_kernel(home):
        ok(pfar(home, "secret", "set", "api_token", stdin=SECRET))
        done = submit_and_wait(home, "deploy", "go")
        assert done["state"] == "Completed", done
    workspace = home.workspace(str(done["task_id"]))
    ps = (workspace / "ps.txt").read_text()
    assert "{{secret:api_token}}" in ps  # the argv reference stayed text
    assert SECRET not in ps
    want = hashlib.sha256(f"{SECRET}|{SECRET}".encode()).hexdigest()
    assert want in ok(pfar(home, "task", "show", str(done["task_id"]), "--json"))
    assert leaked(home) == []


@pytest.mark.parametrize(
    ("credential", "problem"),
    [
        (
            'tool = "file.write"\nenv = { A = "{{secret:x}}" }',
            "credentials.0.tool",
        ),
        (
            'tool = "http.request"\nheaders = { A = "{{secret:x}}" }',
            "needs `host`",
        ),
        (
            'tool = "shell.run"\nenv = { A = "{{secret:x}}" }\nhost = "example.org"',
            "not host or headers",
        ),
        ('tool = "shell.run"\nenv = { A = "plain" }', "names no secret"),
        (
            'tool = "http.request"\nhost = "example.org"\nheaders = { A = "{{secret:x}}" }',
            "which allowed_tools does not list",
        ),
    ],
)
def test_a_credential_that_does_not_fit_its_tool_is_refused_at_load(
    tmp_path: Path, credential: str, problem: str
) -> None:
    home = make_home(tmp_path / "home", script="")
    (home.templates_dir / "bad.toml").write_text(
        'id = "bad"\nallowed_tools = ["shell.run", "file.write"]\n\n[[credentials]]\n'
        + credential
        + "\n"
    )
    with running_kernel(home) as k:
        r = pfar(home, "submit", "bad", "go")
        assert r.returncode != 0
        said = " ".join((r.stdout + r.stderr).split())
        assert "bad.toml" in said and problem in said, said
        assert "template not loaded" in wait_for(k.output, what="kernel output")


class _EchoingServer:
    """Answers 400 with the Authorization header it got, URL-encoded, JSON-escaped
    and base64-encoded: the way real error pages echo a credential back."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                body = json.dumps(
                    {
                        "error": f"bad token {token}",
                        "url": f"/login?token={quote(token, safe='')}",
                        "basic": base64.b64encode(f"me:{token}".encode()).decode(),
                        "shell": shlex.quote(token),
                    }
                ).encode()
                self.send_response(400)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.netloc = f"127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def test_a_secret_echoed_back_encoded_is_redacted_everywhere(tmp_path: Path) -> None:
    secret = f"P@ss w/rd\"tok'en{uuid.uuid4().hex[:12]}"
    server = _EchoingServer()
    try:
        home = make_home(
            tmp_path / "home",
            templates={
                "echo": f"""
                    id = "echo"
                    allowed_tools = ["http.request"]
                    [[credentials]]
                    tool = "http.request"
                    host = "{server.netloc}"
                    headers = {{ Authorization = "Bearer {{{{secret:pw}}}}" }}
                    """
            },
            script=f"""
                [[responses]]
                template = "echo"
                phase = "plan"
                [[responses.json.steps]]
                tool = "http.request"
                args = {{ url = "http://{server.netloc}/me" }}
                """,
        )
        with running_kernel(home) as k:
            ok(pfar(home, "secret", "set", "pw", stdin=secret))
            done = submit_and_wait(home, "echo", "go")
            assert done["state"] == "Failed", done
            assert "[REDACTED:pw]" in str(done["error"])
            shown = ok(pfar(home, "tasks", "--json")) + ok(
                pfar(home, "task", "show", "--json", str(done["task_id"]))
            )
            stdout = k.output()
    finally:
        server.close()
    forms = [secret, quote(secret, safe=""), json.dumps(secret)[1:-1], shlex.quote(secret)]
    forms.append(base64.b64encode(f"me:{secret}".encode()).decode()[4:20])
    for form in forms:
        assert form not in shown and form not in stdout, form
        assert [
            p.name
            for p in home.root.rglob("*")
            if p.is_file() and p.name != "secrets.db" and form.encode() in p.read_bytes()
        ] == [], form


def test_a_secret_too_short_to_redact_is_refused_and_not_stored(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script="")
    r = pfar(home, "secret", "set", "pin", stdin="1234\n")
    assert r.returncode != 0
    said = " ".join((r.stdout + r.stderr).split())
    assert "'pin' is 4 characters long" in said and "at least 8" in said, said
    assert "Traceback" not in said
    with running_kernel(home):
        r = pfar(home, "secret", "set", "pin", stdin="1234\n")
        assert r.returncode != 0 and "at least 8" in r.stdout + r.stderr
    conn = vault_db(home, home.secrets_db)
    assert conn.execute("SELECT count(*) FROM secrets").fetchone()[0] == 0


def test_a_secret_typed_into_task_text_is_replaced_and_the_owner_is_told(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    with running_kernel(home):
        ok(pfar(home, "secret", "set", "api_token", stdin=SECRET))
        r = pfar(home, "submit", "note", f"my token is {SECRET}", "--wait", "--json")
        assert r.returncode == 0, r.stderr
        assert "note: the text held api_token" in r.stderr
        done = json.loads(r.stdout)
        note = home.workspace(str(done["task_id"])) / "note.md"
        assert note.read_text() == "my token is [REDACTED:api_token]\n"
        notices = wait_for(
            lambda: [
                m["body"]
                for m in owner_messages(home)
                if m.get("key") == f"redacted-input:{done['task_id']}"
            ],
            what="the owner's notice",
        )
        assert "its text held api_token" in notices[0]
    assert leaked(home) == []
