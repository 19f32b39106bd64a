"""A canary secret is looked for everywhere pfar could leak it.

A home holds three secrets made from one canary: a template's credential (sent by an
http.request step in a header, and to a shell.run step on its stdin, which echoes it
back), the model's API key (an OpenAI-compatible loopback server) and the Telegram
bot's token (a loopback Bot API server). A real kernel does real work with them: the
pipeline task, a loop task started from the CLI, another started by the owner's
message in Telegram. Then the canary, in the clear, in hex and in base64 (every
alignment), is looked for in every file under the home, while the kernel runs (the
WAL files exist then) and after it stopped; in `ps` and in /proc/PID/cmdline and
/proc/PID/environ of the kernel and of its children while a step's command runs; in
every CLI command's output; and in what the model was sent.

With an encrypted vault it is found nowhere. With a plain one (`pfar init
--no-encrypt`) it is found in secrets.db, which proves the search finds it, and
nowhere else.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pfar.cli.main import cli
from pfar.vault.home import Home

from ..support import KernelProcess, RecordingServer, db, pfar, wait_for
from .openai_server import OpenAIServer, Stream, chunk, text_stream, tool_piece, usage_chunk
from .telegram_server import OWNER, BotApi, unescape

# the command a shell.run step runs: it echoes its stdin (the credential) and waits for
# the test to have looked at it in /proc
WAITING = "cat; while [ ! -e go ]; do sleep 0.05; done"


def forms(canary: str) -> dict[str, bytes]:
    """The canary as it could be found: in the clear, hex (either case), and base64
    (standard and URL-safe) at each of the three alignments it can have inside a longer
    encoded string (only the characters made of its own bits)."""
    raw = canary.encode()
    found = {"clear": raw, "hex": raw.hex().encode(), "HEX": raw.hex().upper().encode()}
    for shift in range(3):
        for name, encode in (("base64", base64.b64encode), ("base64url", base64.urlsafe_b64encode)):
            text = encode(b"\0" * shift + raw)
            first = -(-8 * shift // 6)  # the first character with no bit of the padding
            last = 8 * (shift + len(raw)) // 6  # past the last one with only canary bits
            found[f"{name}+{shift}"] = text[first:last]
    return found


def leaks(data: bytes, canary: str) -> list[str]:
    return [name for name, form in forms(canary).items() if form in data]


def test_forms_find_the_canary_inside_longer_encodings() -> None:
    canary = "pfcanary" + secrets.token_hex(8)
    for before in (b"", b"a", b"ab", b"abc"):
        wrapped = before + b"Bearer " + canary.encode() + b"!"
        assert leaks(base64.b64encode(wrapped), canary), before
        assert leaks(base64.urlsafe_b64encode(wrapped), canary), before
        assert leaks(wrapped.hex().encode(), canary)
        assert leaks(wrapped.hex().upper().encode(), canary)
    assert leaks(b"nothing here", canary) == []


@dataclass
class Setup:
    home: Home
    canary: str
    work: Path
    api: BotApi
    model: OpenAIServer
    service: RecordingServer
    ran: list[tuple[list[str], subprocess.CompletedProcess[str]]]

    def pfar(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """A CLI command, its output kept to be searched."""
        done = pfar(self.home, *args, stdin=stdin)
        self.ran.append((list(args), done))
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done


def _plan(service: RecordingServer) -> dict[str, object]:
    return {
        "steps": [
            {
                "tool": "http.request",
                "args": {"url": f"{service.url}/use", "method": "GET"},
                "description": "call the service with the credentials",
            },
            {
                "tool": "shell.run",
                "args": {"argv": ["sh", "-c", WAITING]},
                "description": "use the credential locally",
            },
        ]
    }


def _tool_call(name: str, args: object) -> Stream:
    return Stream(
        [
            chunk(role="assistant"),
            chunk(tool_calls=[tool_piece(0, id="call_1", name=name, arguments=json.dumps(args))]),
            chunk(finish="tool_calls"),
            usage_chunk(50, 10),
        ]
    )


CONFIG = """
[llm]
provider = "openai"
model = "gpt-test"
base_url = "{model}"
[recovery]
adapter_retry_backoff_seconds = 0.1
[channels]
directory = "{work}"
[channels.telegram]
owner_user_id = {owner}
api_url = "{api}"
poll_timeout_seconds = 1
[loop]
tools = ["Read"]
"""

# canary_late is not in the vault: the step asks for it, and the owner answers in Telegram
TEMPLATE = """
id = "canary_use"
allowed_tools = ["http.request", "shell.run"]

[[credentials]]
tool = "http.request"
host = "{host}"
[credentials.headers]
Authorization = "Bearer {{{{secret:canary_token}}}}"
X-Late = "{{{{secret:canary_late}}}}"

[[credentials]]
tool = "shell.run"
stdin = "{{{{secret:canary_token}}}}"
"""


@pytest.fixture(params=["encrypted", "plain"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    canary = "pfcanary" + secrets.token_hex(12)
    api = BotApi(token=f"{OWNER}:{canary}t")
    model = OpenAIServer()
    service = RecordingServer()
    try:
        s = Setup(Home(tmp_path / "home"), canary, tmp_path / "work", api, model, service, [])
        s.work.mkdir()
        s.pfar(*(["init"] if request.param == "encrypted" else ["init", "--no-encrypt"]))
        s.home.config.write_text(
            CONFIG.format(model=model.base_url, work=s.work, owner=OWNER, api=api.url)
        )
        host = service.url.removeprefix("http://")
        (s.home.templates_dir / "canary_use.toml").write_text(TEMPLATE.format(host=host))
        s.pfar("secret", "set", "canary_token", stdin=f"{canary}c\n")
        s.pfar("secret", "set", "openai_api_key", stdin=f"{canary}m\n")
        s.pfar("secret", "set", "telegram_bot_token", stdin=f"{OWNER}:{canary}t\n")
        yield s
    finally:
        api.close()
        model.close()
        service.close()


def _found_in_files(s: Setup) -> dict[str, list[str]]:
    """Every file under the home (vault files and their WAL, logs, workspaces, the
    kernel's output) that holds the canary, with how."""
    found = {}
    for path in s.home.root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            hits = leaks(path.read_bytes(), s.canary)
            if hits:
                found[str(path.relative_to(s.home.root))] = hits
    return found


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _proc(pid: int, name: str) -> bytes:
    try:
        return (Path("/proc") / str(pid) / name).read_bytes()
    except OSError:  # it ended meanwhile
        return b""


def _found_in_processes(s: Setup, kernel: int) -> list[str]:
    """Where the canary shows in the command lines and environments of the kernel and
    its children (the step's command among them: it is waited for), and in `ps`."""
    wait_for(
        lambda: any(WAITING.encode() in _proc(p, "cmdline") for p in _descendants(kernel)),
        what="the shell.run step's command running",
    )
    found = []
    for pid in [kernel, *_descendants(kernel)]:
        for name in ("cmdline", "environ"):
            hits = leaks(_proc(pid, name), s.canary)
            if hits:
                found.append(f"/proc/{pid}/{name} ({_proc(pid, 'cmdline')[:80]!r}): {hits}")
    ps = subprocess.run(["ps", "-eww", "-o", "pid,ppid,args"], capture_output=True, check=True)
    hits = leaks(ps.stdout, s.canary)
    if hits:
        found.append(f"ps: {hits}")
    return found


def _state(k: KernelProcess, task_id: str) -> object:
    return next(t["state"] for t in k.request("tasks") if t["task_id"] == task_id)


def _read_everything(s: Setup, k: KernelProcess) -> None:
    """Every reading command, on every task."""
    for args in (
        ["tasks"],
        ["tasks", "--json"],
        ["secret", "list"],
        ["approvals"],
        ["events"],
        ["events", "--json"],
        ["channels"],
        ["queue"],
        ["learnings"],
        ["recover", "--dry-run"],
        ["session", "list"],
    ):
        s.pfar(*args)
    for task in k.request("tasks"):
        s.pfar("task", "show", task["task_id"])
        s.pfar("task", "trace", task["task_id"])
    # the vault's and the audit log's own commands, as far as this pfar has them
    for group, sub in (("vault", "status"), ("audit", "show"), ("audit", "verify")):
        found = cli.commands.get(group)
        if found is not None and sub in getattr(found, "commands", {}):
            s.pfar(group, sub)


def _answer_the_credential_prompt_in_telegram(s: Setup) -> None:
    prompt = wait_for(
        lambda: next((m for m in s.api.sent if "canary_late" in unescape(m.text)), None),
        what="the credential prompt in Telegram",
    )

    def known() -> bool:  # a reply names a message pfar knows once the server answered
        with contextlib.closing(db(s.home)) as conn:
            found = conn.execute(
                "SELECT 1 FROM channel_outbox WHERE channel = 'telegram' AND remote_id = ?",
                (str(prompt.message_id),),
            ).fetchone()
        return found is not None

    wait_for(known, what="the prompt's id journaled")
    s.api.say(f"{s.canary}l", reply_to=prompt.message_id)
    wait_for(lambda: s.api.deleted, what="the owner's message deleted from the chat")


@pytest.mark.slow
def test_a_canary_secret_is_found_nowhere_it_should_not_be(setup: Setup) -> None:
    s = setup
    plain = not (s.home.vault_dir / "unlock.json").exists()
    s.model.script(
        _tool_call("record_metadata", {"summary": "use the service", "entities": []}),
        _tool_call("submit_plan", _plan(s.service)),
        Stream(text_stream("Used ", "the service.")),
    )
    # its stdout and stderr go to a file in the home: searched with the rest
    k = KernelProcess(s.home)
    try:
        k.wait_ready()
        wait_for(
            lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in s.api.calls),
            what="the Telegram channel polling",
        )
        task_id = json.loads(s.pfar("submit", "canary_use", "use the service", "--json").stdout)[
            "task_id"
        ]
        _answer_the_credential_prompt_in_telegram(s)
        in_processes = _found_in_processes(s, k.proc.pid)
        (s.home.workspace(task_id) / "go").touch()
        wait_for(lambda: _state(k, task_id) == "Completed", what="the pipeline task done")
        # a loop task from the CLI, and one from the owner's message in Telegram
        s.model.script(Stream(text_stream("Nothing to see.")))
        s.pfar("loop", "--dir", str(s.work), "--wait", "look around")
        s.model.script(Stream(text_stream("Hello, owner.")))
        s.api.say("hello")
        wait_for(
            lambda: any("Hello, owner." in unescape(m.text) for m in s.api.sent),
            what="the answer in Telegram",
        )
        _read_everything(s, k)
        running = _found_in_files(s)  # the WAL files exist now
        assert k.terminate() == 0, k.output()
    finally:
        if k.proc.poll() is None:
            k.kill()
    stopped = _found_in_files(s)

    # the secrets were used for real, sent where they belong
    (used,) = [r["headers"] for r in s.service.requests]
    assert used.get("Authorization") == f"Bearer {s.canary}c", used
    assert used.get("X-Late") == f"{s.canary}l", used
    assert {r.headers.get("authorization") for r in s.model.received} == {f"Bearer {s.canary}m"}
    assert any(m == "sendMessage" for m, _ in s.api.calls)
    # ... and nowhere else: not to the model (the command's echo was redacted) ...
    told_model = [leaks(json.dumps(r.body).encode(), s.canary) for r in s.model.received]
    assert not any(told_model), told_model
    assert [m.text for m in s.api.sent if leaks(m.text.encode(), s.canary)] == []
    # ... not in a process's command line or environment, nor in any command's output
    assert in_processes == [], in_processes
    said = [(args, leaks((d.stdout + d.stderr).encode(), s.canary)) for args, d in s.ran]
    assert [(args, hits) for args, hits in said if hits] == []
    # ... and in no file of the home, but the plain vault's secrets.db
    if plain:
        assert "vault/secrets.db" in {**running, **stopped}, (running, stopped)  # it can fail
        vault = ("vault/secrets.db", "vault/secrets.db-wal")
        running = {f: hits for f, hits in running.items() if f not in vault}
        stopped = {f: hits for f, hits in stopped.items() if f not in vault}
    assert running == {}, running
    assert stopped == {}, stopped
