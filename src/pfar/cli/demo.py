"""`pfar demo`: SIGKILL a kernel in the middle of real work, restart it, show that nothing
was lost and no write ran twice.

Everything is real: a temporary home with a SQLite vault, the kernel as a child
process, a loopback HTTP server that records every request (the "far side"),
and a write log that every shell step appends to.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..journal import Journal, TaskRecord
from ..kernel.setup_home import init_home
from ..policy.printable import printable
from ..vault import keys
from ..vault.home import Home
from ..vault.sqlite import connect
from . import client

con = Console(highlight=False)

TEMPLATES = {
    "publish": """
        id = "publish"
        description = "Publish the weekly notes"
        allowed_tools = ["http.request", "file.write", "shell.run"]
        [timeouts]
        step_seconds = 20
    """,
    "deploy": """
        id = "deploy"
        description = "Deploy the site"
        allowed_tools = ["shell.run"]
        [approval]
        require = ["shell.run"]
        on_deny = "fail"
    """,
    "sync": """
        id = "sync"
        description = "Sync the calendar"
        allowed_tools = ["http.request"]
        [timeouts]
        step_seconds = 20
    """,
    "digest": """
        id = "digest"
        description = "Morning digest"
        allowed_tools = ["http.request"]
    """,
}


def _script(url: str, write_log: Path) -> str:
    def shell(tag: str, sleep: float) -> str:
        return json.dumps(["sh", "-c", f"echo {tag} >> {write_log}; sleep {sleep}"])

    def step(template: str, tool: str, description: str, args: str) -> str:
        return (
            f'[[responses.json.steps]]\ntool = "{tool}"\ndescription = "{description}"\n'
            f"args = {{ {args} }}\n"
        )

    return (
        "\n".join(
            [
                '[[responses]]\ntemplate = "publish"\nphase = "plan"',
                step(
                    "publish",
                    "http.request",
                    "read this week's notes",
                    f'method = "GET", url = "{url}/notes/week"',
                ),
                step(
                    "publish",
                    "http.request",
                    "post them to the blog",
                    f'method = "POST", url = "{url}/blog", body = "weekly"',
                ),
                step(
                    "publish", "file.write", "keep a copy", 'path = "weekly.md", content = "$step0"'
                ),
                step(
                    "publish",
                    "shell.run",
                    "announce it (slow)",
                    f"argv = {shell('publish:announce', 4)}",
                ),
                '[[responses]]\ntemplate = "deploy"\nphase = "plan"',
                step("deploy", "shell.run", "release", f"argv = {shell('deploy:release', 0)}"),
                '[[responses]]\ntemplate = "sync"\nphase = "plan"',
                step(
                    "sync",
                    "http.request",
                    "push events (the far side is slow)",
                    f'method = "PUT", url = "{url}/calendar/slow", body = "x"',
                ),
                step(
                    "sync",
                    "http.request",
                    "mark synced",
                    f'method = "POST", url = "{url}/calendar/done"',
                ),
                '[[responses]]\ntemplate = "digest"\nphase = "plan"\ndelay_seconds = 30\n'
                "json = { steps = [] }",
                '[[responses]]\nphase = "synthesize"\ntext = "done ($template)."',
                # the agentic loop: writes a file, then runs the (slow) tests
                '[[turns]]\nmatch = "^Fix the greeting"\nturn = 1\n'
                'text = "I will fix the greeting, then run the tests."\n'
                "tool_calls = [\n"
                '  { name = "file.write", input = { path = "greeting.txt", '
                'content = "hello, world" } },\n'
                f'  {{ name = "shell.run", input = {{ argv = {shell("loop:tests", 5)} }} }},\n'
                "]",
                '[[turns]]\nmatch = "^Fix the greeting"\ntext = "What I know: $last"',
            ]
        )
        + "\n"
    )


LOOP_CONFIG = """[loop]
tools = ["file.read", "file.write", "shell.run"]
always_allow = ["file.read", "file.write", "shell.run"]
"""


class FarSide:
    """The outside world: records requests, applies each Idempotency-Key once."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        self.applied: Counter[str] = Counter()
        self.replays: Counter[str] = Counter()
        side = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                key = self.headers.get("Idempotency-Key")
                side.requests.append((self.command, self.path, key))
                if self.path.endswith("/slow"):
                    time.sleep(3)
                if self.command != "GET" and key:
                    if key in side.applied:
                        side.replays[key] += 1
                    else:
                        side.applied[key] += 1
                body = b"notes of the week" if self.command == "GET" else b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the kernel was killed mid-request: that is the point of the demo

        self.httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


def _start_kernel(home: Home, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PFAR_HOME": str(home.root)}
    env.pop("PFAR_FAULT", None)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pfar", "run", "--no-stdin"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    _until(lambda: client.kernel_running(home), 20, "the kernel to start")
    return proc


def _until(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"demo: timed out waiting for {what}")


def _q(home: Home, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = connect(home.sessions_db, key=keys.unlock(home), readonly=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _owner_log(home: Home, seen: int) -> int:
    lines = home.owner_log.read_text().splitlines() if home.owner_log.exists() else []
    for line in lines[seen:]:
        msg = json.loads(line)
        body = printable(escape(msg["body"]), indent="           ")
        con.print(f"[bold magenta]  owner ← [/]{body}")
    return len(lines)


def _tasks_table(home: Home, names: dict[str, str]) -> Table:
    t = Table(title_justify="left")
    for c in ("task", "task_id", "state", "step", "error"):
        t.add_column(c)
    with Journal.open_readonly(home.sessions_db, key=keys.unlock(home)) as journal:
        listed = asyncio.run(journal.tasks.listing(limit=1000))
    tasks = sorted(
        (task for task in listed if isinstance(task, TaskRecord)), key=lambda t: t.created_at
    )
    for task in tasks:
        tid, total = task.task_id, len(task.plan_steps)
        step = f"{task.current_step}/{total}" if task.plan else ""
        t.add_row(names.get(tid, tid[:8]), tid[:8], task.state.value, step, task.error or "")
    return t


def run_demo(keep: bool = False) -> int:
    root = Path(tempfile.mkdtemp(prefix="pfar-demo-"))
    home = Home(root / "home")
    far = FarSide()
    write_log = root / "writes.log"
    kernel_log = root / "kernel.log"
    con.rule("[bold]pfar demo: kill -9 in the middle of real work")
    # encrypted as `pfar init` makes a vault; its key file stays in the demo's own folder
    init_home(home, examples=False, key_file=root / "vault.key")
    for tid, body in TEMPLATES.items():
        (home.templates_dir / f"{tid}.toml").write_text(
            "\n".join(line.strip() for line in body.strip().splitlines()) + "\n"
        )
    (home.root / "scripts" / "default.toml").write_text(_script(far.url, write_log))
    home.config.write_text(home.config.read_text() + "\n" + LOOP_CONFIG)
    work = root / "work"
    work.mkdir()
    con.print(f"home {home.root}  (SQLite vault, scripted model)")
    con.print(f"far side: a loopback HTTP server at {far.url}; shell steps append to writes.log")

    proc = _start_kernel(home, kernel_log)
    con.print(
        f"\n[bold]1.[/] kernel started (pid {proc.pid}); submitting four tasks and "
        "starting an agent"
    )
    names: dict[str, str] = {}
    for tpl, text in (
        ("deploy", "release v2"),
        ("publish", "weekly notes"),
        ("sync", "calendar"),
        ("digest", "morning"),
    ):
        r = client.call(home, {"op": "submit", "template": tpl, "text": text})
        names[r["task_id"]] = tpl
        con.print(f"   submitted {tpl:8} → task {r['task_id'][:8]}")
    r = client.call(
        home,
        {
            "op": "loop",
            "prompt": "Fix the greeting and run the tests",
            "directory": str(work),
            "once": True,
        },
    )
    names[r["task_id"]] = "agent"
    con.print(f"   pfar loop 'Fix the greeting and run the tests' → task {r['task_id'][:8]}")
    seen = 0
    ids = {v: k for k, v in names.items()}

    def ready() -> bool:
        parked = _q(home, "SELECT state FROM task_journal WHERE task_id = ?", ids["deploy"])
        shell = _q(
            home, "SELECT status FROM task_steps WHERE task_id = ? AND step = 3", ids["publish"]
        )
        slow = any(p.endswith("/slow") for _, p, _ in far.requests)
        agent = _q(
            home, "SELECT status FROM task_steps WHERE task_id = ? AND step = 1", ids["agent"]
        )
        return bool(
            agent
            and agent[0][0] == "started"
            and parked
            and parked[0][0] == "AwaitingApproval"
            and shell
            and shell[0][0] == "started"
            and slow
        )

    _until(ready, 30, "the tasks to reach their crash points")
    seen = _owner_log(home, seen)
    con.print(
        "\n[bold]2.[/] now: deploy waits for approval, publish is running its 4th step "
        "(a shell write), sync's PUT is in flight at the far side, digest is planning, "
        "and the agent wrote greeting.txt and is running the tests (a command)"
    )
    con.print(_tasks_table(home, names))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    con.print(f"[bold red]   SIGKILL[/] → kernel {proc.pid} is dead (no shutdown, no flush)")

    con.print("\n[bold]3.[/] what recovery will do (pfar recover --dry-run reads the vault):")
    dry = subprocess.run(
        [sys.executable, "-m", "pfar", "--home", str(home.root), "recover", "--dry-run", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    for d in json.loads(dry.stdout)["decisions"]:
        con.print(f"   {names.get(d['task_id'], '?'):8} {d['state']:18} → {d['action']}")

    time.sleep(3.5)  # let the far side finish the PUT the dead kernel sent
    proc = _start_kernel(home, kernel_log)
    con.print(f"\n[bold]4.[/] kernel restarted (pid {proc.pid}); the owner hears:")
    time.sleep(0.5)
    seen = _owner_log(home, seen)

    con.print("\n[bold]5.[/] the owner answers")
    pending = _until(
        lambda: _q(
            home,
            "SELECT approval_id, task_id, action_type FROM "
            "pending_approvals WHERE status = 'pending'",
        ),
        10,
        "questions to the owner",
    )
    for approval_id, task_id, action in pending:
        decision = "skip" if action == "write_in_doubt" else "approve"
        why = (
            f"writes.log shows {'the tests' if names[task_id] == 'agent' else 'it'} ran, so: skip"
            if decision == "skip"
            else "approve the release"
        )
        client.call(home, {"op": "answer", "approval_id": approval_id, "decision": decision})
        con.print(f"   {names[task_id]:8} {action:15} → {decision}  ({why})")
    # a replayed answer has no second effect
    client.call(
        home,
        {
            "op": "answer",
            "approval_id": pending[0][0],
            "decision": "skip" if pending[0][2] == "write_in_doubt" else "approve",
        },
    )

    def settled() -> bool:
        rows = _q(home, "SELECT state FROM task_journal")
        return all(r[0] in ("Completed", "Failed", "Abandoned") for r in rows)

    _until(settled, 60, "every task to finish")
    time.sleep(0.3)
    seen = _owner_log(home, seen)
    con.print("\n[bold]6.[/] every task reached its end:")
    con.print(_tasks_table(home, names))
    told = _q(
        home,
        "SELECT body_json FROM loop_turns WHERE task_id = ? AND body_json LIKE '%results%'",
        ids["agent"],
    )
    for (body,) in told:
        for result in json.loads(body)["results"]:
            if result["is_error"]:
                text = printable(escape(result["content"]), indent="           ")
                con.print(f"   the agent's model was told: [italic]{text}[/]")

    con.print("\n[bold]7.[/] proof that no write ran twice")
    lines = Counter(write_log.read_text().split()) if write_log.exists() else Counter()
    for tag, n in sorted(lines.items()):
        con.print(f"   writes.log  {tag:18} ran {n}×")
    for key, n in sorted(far.applied.items()):
        extra = (
            f" (+{far.replays[key]} retry recognised by its Idempotency-Key)"
            if (far.replays[key])
            else ""
        )
        con.print(f"   far side    key {key[:8]}…:{key.split(':')[1]:3} applied {n}×{extra}")
    twice = [k for k, n in lines.items() if n > 1] + [k for k, n in far.applied.items() if n > 1]
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    far.httpd.shutdown()
    ok = not twice and settled()
    if ok:
        con.print(
            "\n[bold green]no task lost, no write repeated.[/] "
            "(kernel stopped with SIGTERM: clean shutdown)"
        )
    else:
        con.print(f"\n[bold red]a write ran twice: {twice}[/]")
    if keep:
        con.print(f"home kept at {home.root}; try: pfar --home {home.root} tasks")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1
