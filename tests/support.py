"""Test support: homes with templates and scripts, the kernel as a real subprocess,
and the journal read (and, for set-up, written) on either backend."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pfar import init_home
from pfar.cli.client import call
from pfar.journal import TaskState, payloads
from pfar.journal.owner_records import ApprovalRecord
from pfar.journal.payloads import Payload
from pfar.journal.records import TaskRecord
from pfar.journal.store import Store
from pfar.journal.timestamps import rfc3339
from pfar.journal.turns import dump
from pfar.vault import keys
from pfar.vault.driver import sqlite
from pfar.vault.home import Home
from pfar.vault.keys import EncryptChoice

# the recording server is still imported from here by the tests that use it
from .recording_server import RecordingServer  # noqa: F401

# The journal backend a test's homes get: "sqlite", or "postgresql" where a test runs
# on both (tests/crash/conftest.py sets it per test)
BACKEND = {"name": "sqlite"}


def make_home(
    root: Path,
    *,
    templates: dict[str, str] | None = None,
    script: str | None = None,
    config: str | None = None,
    examples: bool = False,
    encryption: EncryptChoice = "auto",
    backend: str | None = None,
    postgres_dsn: str | None = None,
) -> Home:
    """A fresh home. `templates` maps id -> TOML body; `script` is the scripted model's file.
    Encrypted as `pfar init` makes it (its key in a file: no keychain in tests), unless
    `encryption` says otherwise. Its journal is on `backend` (BACKEND's by default): on
    PostgreSQL, in a schema of the run's own database that the home's directory names,
    or in the database `postgres_dsn` names (a server of the test's own)."""
    home = Home(root)
    postgres = None
    if postgres_dsn is not None:
        from pfar.kernel.setup_postgres import PostgresInit

        postgres = PostgresInit(postgres_dsn)
    elif (backend or BACKEND["name"]) == "postgresql":
        from pfar.kernel.setup_postgres import PostgresInit

        from .pg_support import store_dsn

        postgres = PostgresInit(store_dsn(root))
    init_home(home, examples=examples, encryption=encryption, postgres=postgres)
    for tid, body in (templates or {}).items():
        (home.templates_dir / f"{tid}.toml").write_text(textwrap.dedent(body))
    if script is not None:
        (home.root / "scripts" / "default.toml").write_text(textwrap.dedent(script))
    if config is not None:
        home.config.write_text(textwrap.dedent(config) + _vault_table(home, config))
    return home


def _vault_table(home: Home, config: str) -> str:
    """A test's own config.toml keeps the home's journal where init put it."""
    if BACKEND["name"] != "postgresql" or "[vault" in config:
        return ""
    from .pg_support import store_dsn

    return (
        f'\n[vault]\nbackend = "postgresql"\n\n[vault.postgresql]\ndsn = "{store_dsn(home.root)}"\n'
    )


class KernelProcess:
    """`pfar run` as a real child process, to be killed with SIGKILL or stopped with SIGTERM."""

    def __init__(
        self,
        home: Home,
        fault: str | None = None,
        env: dict[str, str] | None = None,
        out_dir: Path | None = None,
    ) -> None:
        self.home = home
        full_env = {**os.environ, "PFAR_HOME": str(home.root), **(env or {})}
        full_env.pop("PFAR_FAULT", None)
        if fault:
            full_env["PFAR_FAULT"] = fault
        # out_dir: elsewhere than the home, for a home whose disk fills up or fails
        self.stdout_path = (out_dir or home.root) / f"kernel-{time.monotonic_ns()}.out"
        self._out = open(self.stdout_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pfar", "run", "--no-stdin"],
            env=full_env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"kernel exited early ({self.proc.returncode}):\n{self.output()}"
                )
            try:
                call(self.home, {"op": "ping"}, timeout=1.0)
                return
            except Exception:
                time.sleep(0.05)
        raise AssertionError(f"kernel not ready after {timeout}s:\n{self.output()}")

    def request(self, op: str, **kw: Any) -> Any:
        return call(self.home, {"op": op, **kw})

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._out.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.wait_exit()

    def terminate(self, timeout: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def output(self) -> str:
        if not self._out.closed:
            self._out.flush()
        return self.stdout_path.read_text(errors="replace")

    def killed_by_fault(self, timeout: float = 30.0) -> bool:
        """True when the fault hook killed the process (it dies of SIGKILL by itself)."""
        code = self.wait_exit(timeout)
        return code == -signal.SIGKILL


@contextmanager
def running_kernel(home: Home, **kw: Any) -> Iterator[KernelProcess]:
    k = KernelProcess(home, **kw)
    try:
        k.wait_ready()
        yield k
    finally:
        if k.proc.poll() is None:
            k.terminate()


def wait_for_file(gate: Path | str) -> str:
    """A shell loop that waits for the file `gate`: a step held until the test has done
    what must land while it runs. Two minutes at most, so a test that failed before
    making the file leaves no process behind."""
    return f"n=0; until [ -f {gate} ] || [ $n -ge 2400 ]; do n=$((n+1)); sleep 0.05; done"


def wait_for(predicate: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def vault_db(home: Home, path: Path | None = None, **kw: Any) -> sqlite.Connection:
    """A bare connection to the journal (or to another of the home's vault files), with
    the vault's key when it is encrypted: what `sqlite3.connect` is to a plain file."""
    conn = sqlite.connect(path or home.sessions_db, **{"timeout": 10, **kw})
    key = keys.unlock(home)
    if key is not None:
        conn.execute(f"PRAGMA key = {key.pragma()}")
    return conn


T = TypeVar("T")


def read_journal(home: Home, read: Callable[[Store], Awaitable[T]]) -> T:
    """One read of the home's journal through its store's verbs, opened read-only (as
    `pfar` looks at a home): `read_journal(home, lambda s: s.tasks.get(task_id))`."""
    return asyncio.run(_read_journal(home, read))


def write_journal(home: Home, write: Callable[[Store], Awaitable[T]]) -> T:
    """One write through the store's verbs, with no kernel running: a situation set up
    as the kernel itself would journal it, whatever the backend."""
    return asyncio.run(_read_journal(home, write, readonly=False))


async def _read_journal(
    home: Home, read: Callable[[Store], Awaitable[T]], *, readonly: bool = True
) -> T:
    from pfar.config import Config
    from pfar.journal.open_store import open_store

    config = Config.load(home.config)
    journal = await open_store(home, config.vault, key=keys.unlock(home), readonly=readonly)
    try:
        return await read(journal)
    finally:
        await journal.aclose()


def age_task(home: Home, task_id: str, updated_at: datetime) -> None:
    """Test set-up only, with no kernel running: the task's last journal update put at
    `updated_at`, a situation no verb makes (a task left for minutes by a dead kernel).
    What the test then checks it reads through the store's verbs. On the backend the
    home's config.toml names: SQLite's file through vault_db, PostgreSQL through its DSN."""
    from pfar.config import Config
    from pfar.journal.open_store import backend_of

    sql = "UPDATE task_journal SET updated_at = ? WHERE task_id = ?"
    args = (rfc3339(updated_at), task_id)
    if backend_of(home) == "postgresql":
        import psycopg

        pg = Config.load(home.config).vault.postgresql
        assert pg is not None, "backend = postgresql with no [vault.postgresql]"
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            changed = conn.execute(sql.replace("?", "%s"), args).rowcount
    else:
        with contextlib.closing(vault_db(home, isolation_level=None)) as conn:
            changed = conn.execute(sql, args).rowcount
    assert changed == 1, f"no task {task_id} in the journal"


def db(home: Home) -> sqlite.Connection:
    """A connection to SQLite's journal, rows by name, for a test of SQLite's file itself."""
    conn = vault_db(home, isolation_level=None)
    conn.row_factory = sqlite.Row
    return conn


def task_states(home: Home) -> dict[str, str]:
    """Each task's state by id, as the journal's store lists them (any backend)."""
    listed = read_journal(home, lambda s: s.tasks.listing(limit=1_000_000))
    return {t.task_id: str(t.state) for t in listed}


def tasks_in_order(home: Home) -> list[TaskRecord]:
    """Every task in the journal, in the order they were created."""
    listed = read_journal(home, lambda s: s.tasks.listing(limit=1_000_000))
    found = [t for t in listed if isinstance(t, TaskRecord)]
    assert len(found) == len(listed), f"unreadable tasks: {listed}"
    return sorted(found, key=lambda t: t.created_at)


def task_record(home: Home, task_id: str) -> TaskRecord:
    return read_journal(home, lambda s: s.tasks.get(task_id))


def step_statuses(home: Home, task_id: str) -> dict[int, str]:
    """Each journaled step of the task and its status."""
    steps = read_journal(home, lambda s: s.tasks.steps(task_id))
    return {r.step: str(r.status) for r in steps}


def task_approvals(home: Home, task_id: str) -> list[ApprovalRecord]:
    """The task's questions to the owner, oldest first, whatever their status."""
    return read_journal(home, lambda s: s.questions.approvals_for_task(task_id))


def pending_approvals(home: Home) -> list[ApprovalRecord]:
    return read_journal(home, lambda s: s.questions.approvals())


def loop_turns(home: Home, task_id: str) -> list[dict[str, Any]]:
    """A loop task's conversation, each turn as the journal holds it (a JSON object)."""
    found = read_journal(home, lambda s: s.loops.turns(task_id))
    return [json.loads(dump(t.turn)) for t in found]


def task_of_event(home: Home, event_id: str) -> str | None:
    """The task an inbound event created (None: the journal has not seen the event)."""
    return read_journal(home, lambda s: s.adapters.event_task(event_id)) or None


def last_boot(home: Home) -> dict[str, Any]:
    """The newest boot in the journal: its id, pid and whether it ended cleanly."""
    found = read_journal(home, lambda s: s.events.last_boot())
    assert found is not None, "the journal has no boot"
    return found


def owner_messages(home: Home) -> list[dict[str, Any]]:
    if not home.owner_log.exists():
        return []
    return [json.loads(line) for line in home.owner_log.read_text().splitlines() if line]


def pfar(
    home: Home | Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`pfar --home HOME ARGS...` as a real process; wide terminal so messages never wrap."""
    root = home.root if isinstance(home, Home) else home
    env = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1"}
    env.pop("PFAR_HOME", None)
    env.pop("PFAR_FAULT", None)
    return subprocess.run(
        [sys.executable, "-m", "pfar", "--home", str(root), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def said(proc: subprocess.CompletedProcess[str]) -> str:
    """Everything the command printed, whitespace normalised."""
    return " ".join((proc.stdout + proc.stderr).split())


def payload_for(state: TaskState, current_step: int = 0) -> Payload:
    """A payload of `state` at plan step `current_step`, as the journal would hold it."""
    if state is TaskState.Executing:
        return payloads.Executing(current_step=current_step)
    if state is TaskState.AwaitingApproval:
        return payloads.AwaitingApproval(approval_id="approval-1", step=current_step)
    if state is TaskState.AwaitingCredential:
        return payloads.AwaitingCredential(
            prompt_id="prompt-1", service="svc", prompt_message_id="m-1", step=current_step
        )
    if state is TaskState.Paused:
        return payloads.Paused(then=payloads.Executing(current_step=current_step))
    if state is TaskState.Cancelling:
        return payloads.Cancelling(cancelled_from=TaskState.Executing, step=current_step)
    if state is TaskState.Blocked:
        return payloads.Blocked(step=current_step, child_task_id="child-1")
    if state is TaskState.Queued:
        return payloads.Queued(then=payloads.Executing(current_step=current_step), priority=5)
    return payloads.EMPTY[state]
