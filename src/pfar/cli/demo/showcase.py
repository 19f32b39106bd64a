"""The demo's story, told step by step: start the kernel, submit work, SIGKILL it at the
crash points, restart it, answer the owner's questions, and count the writes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ...journal import TaskRecord
from ...journal.question_kinds import QuestionKind
from ...journal.sqlite import open_readonly
from ...kernel.setup_home import init_home
from ...policy.printable import printable
from ...vault import keys
from ...vault.home import Home
from ...vault.sqlite import connect
from .. import client
from .far_side import FarSide
from .scenario import LOOP_CONFIG, TEMPLATES, script

con = Console(highlight=False)


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
    with open_readonly(home.sessions_db, key=keys.unlock(home)) as journal:
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
    # encrypted as `pfar init` makes a vault; its key file stays in the demo's own folder,
    # in a folder of its own: the key's folder is hidden from every tool, and the
    # agent's project is beside it
    (root / "key").mkdir(mode=0o700)
    init_home(home, examples=False, key_file=root / "key" / "vault.key")
    for tid, body in TEMPLATES.items():
        (home.templates_dir / f"{tid}.toml").write_text(
            "\n".join(line.strip() for line in body.strip().splitlines()) + "\n"
        )
    (home.root / "scripts" / "default.toml").write_text(script(far.url, write_log))
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
        decision = "skip" if action == QuestionKind.write_in_doubt else "approve"
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
            "decision": "skip" if pending[0][2] == QuestionKind.write_in_doubt else "approve",
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
