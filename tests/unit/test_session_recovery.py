"""Session crash recovery on real sessions.db files made by pfar's migrations.

A "crash" is a kernel that stops without pausing its sessions: its connection is
dropped (or its process SIGKILLed) and a new SessionManager opens the same file,
as the next kernel would. Database failures are real ones (a write lock held by
another connection, a read-only connection, a table renamed away, a trigger that
aborts), never mocks of pfar's code.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from asyncio import run
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pfar.errors import PfarError, SessionRecoveryFailed, SessionStoreError, VaultError
from pfar.journal.records import now_rfc3339, parse_rfc3339
from pfar.journal.sessions import SessionLifecycle, SessionRecord, SessionStatus
from pfar.journal.sqlite import sessions_on
from pfar.journal.sqlite.connection import JournalConnection
from pfar.recovery.sessions import CrashRecovery, recovery_message
from pfar.tools import agent_process
from pfar.tools.processes import start_time
from pfar.vault.driver import sqlite
from pfar.vault.sqlite import open_vault_db

CREATED, ACTIVE, PAUSED, TERMINATED = (
    SessionStatus.CREATED,
    SessionStatus.ACTIVE,
    SessionStatus.PAUSED,
    SessionStatus.TERMINATED,
)


class Kernel:
    """One kernel's view of sessions.db: a manager and lifecycle on its own connection."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.conn = open_vault_db(path, "sessions", create=create, factory=JournalConnection)
        self.manager = sessions_on(self.conn)
        self.lifecycle = SessionLifecycle(self.manager)
        self.recovery = CrashRecovery(self.manager)

    def activate(
        self,
        project: str,
        thread: str,
        context: dict[str, Any] | None = None,
        process: dict[str, Any] | None = None,
    ) -> SessionRecord:
        rec = run(self.manager.create(project, thread))
        return run(
            self.lifecycle.transition(
                rec.session_id, CREATED, ACTIVE, context=context, process=process
            )
        )

    def crash(self) -> None:
        """Stop without pausing anything: the connection just goes away."""
        self.manager.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "vault" / "sessions.db"
    open_vault_db(path, "sessions", create=True, factory=JournalConnection).close()
    return path


@pytest.fixture
def kernels(db: Path) -> Iterator[Callable[[], Kernel]]:
    opened: list[Kernel] = []

    def start() -> Kernel:
        k = Kernel(db)
        opened.append(k)
        return k

    yield start
    for k in opened:
        k.manager.close()


def rows(db: Path) -> list[tuple[Any, ...]]:
    """Every column of every session, read by a connection of the test's own."""
    conn = sqlite.connect(db)
    try:
        return conn.execute("SELECT * FROM sessions ORDER BY session_id").fetchall()
    finally:
        conn.close()


def never_running(process: dict[str, Any]) -> bool:
    return False


# -- the seed's seven cases ------------------------------------------------------


def test_clean_startup_returns_empty(kernels: Callable[[], Kernel], db: Path) -> None:
    first = kernels()
    run(first.manager.create("/proj1", "t1"))  # CREATED
    paused = first.activate("/proj2", "t2")
    run(first.lifecycle.transition(paused.session_id, ACTIVE, PAUSED))
    first.crash()
    before = rows(db)
    second = kernels()
    assert asyncio.run(second.recovery.detect_crashed_sessions()) == []
    assert run(second.recovery.recover()) == []
    assert rows(db) == before
    assert recovery_message([]) == ""


def test_crash_with_one_active_session_pauses_it(kernels: Callable[[], Kernel]) -> None:
    first = kernels()
    session = first.activate("/proj2", "t2", context={"history": ["hi", "hello"], "turn": 2})
    first.crash()

    second = kernels()
    assert [r.session_id for r in asyncio.run(second.recovery.detect_crashed_sessions())] == [
        session.session_id
    ]
    recovered = run(second.recovery.recover())
    assert recovered == [session.session_id]
    updated = asyncio.run(second.manager.get(session.session_id))
    assert updated.status is PAUSED
    assert "recovered_at" in updated.context
    # the context the session had survives the crash
    assert updated.context["history"] == ["hi", "hello"] and updated.context["turn"] == 2
    assert updated.process is None
    assert (updated.project_path, updated.thread_id) == ("/proj2", "t2")
    # a recovered session can be resumed
    resumed = run(second.lifecycle.transition(session.session_id, PAUSED, ACTIVE))
    assert resumed.status is ACTIVE
    assert recovery_message(recovered) == "Recovered 1 session after crash"


def test_crash_with_multiple_active_sessions(kernels: Callable[[], Kernel]) -> None:
    first = kernels()
    s1 = first.activate("/p1", "t1")
    s2 = first.activate("/p2", "t2")
    s3 = first.activate("/p3", "t3")
    first.crash()

    second = kernels()
    recovered = run(second.recovery.recover())
    assert len(recovered) == 3
    assert recovered == [s1.session_id, s2.session_id, s3.session_id]  # oldest first
    for sid in recovered:
        assert asyncio.run(second.manager.get(sid)).status is PAUSED
    assert asyncio.run(second.manager.list(status=ACTIVE)) == []
    assert recovery_message(recovered) == "Recovered 3 sessions after crash"


def test_mix_of_statuses_only_active_transition(kernels: Callable[[], Kernel]) -> None:
    first = kernels()
    created = run(first.manager.create("/p", "t-created"))
    active = first.activate("/p", "t-active", context={"k": "v"})
    paused = first.activate("/p", "t-paused")
    run(first.lifecycle.transition(paused.session_id, ACTIVE, PAUSED))
    ended = first.activate("/p", "t-terminated")
    run(first.lifecycle.transition(ended.session_id, ACTIVE, TERMINATED))
    untouched = {
        sid: asyncio.run(first.manager.get(sid))
        for sid in (created.session_id, paused.session_id, ended.session_id)
    }
    first.crash()

    second = kernels()
    assert run(second.recovery.recover()) == [active.session_id]
    for sid, rec in untouched.items():
        assert asyncio.run(second.manager.get(sid)) == rec  # every field, updated_at included
    assert asyncio.run(second.manager.get(active.session_id)).status is PAUSED
    statuses = sorted(r.status.value for r in asyncio.run(second.manager.list()))
    assert statuses == ["CREATED", "PAUSED", "PAUSED", "TERMINATED"]


def test_recovered_at_timestamp_in_context(kernels: Callable[[], Kernel]) -> None:
    first = kernels()
    a = first.activate("/p", "t1")
    b = first.activate("/p", "t2")
    first.crash()

    second = kernels()
    lower = now_rfc3339()
    run(second.recovery.recover())
    upper = now_rfc3339()
    at_a = asyncio.run(second.manager.get(a.session_id)).context["recovered_at"]
    assert lower <= at_a <= upper  # RFC 3339 UTC text sorts in time order
    assert parse_rfc3339(at_a).utcoffset() is not None
    assert (
        asyncio.run(second.manager.get(b.session_id)).context["recovered_at"] == at_a
    )  # one moment

    third_session = second.activate("/p", "t3")
    second.crash()
    third = kernels()
    assert run(third.recovery.recover(now="2030-01-02T03:04:05.000006Z")) == [
        third_session.session_id
    ]
    got = asyncio.run(third.manager.get(third_session.session_id))
    assert got.context["recovered_at"] == "2030-01-02T03:04:05.000006Z"
    assert got.updated_at >= at_a


def test_recovery_is_idempotent(kernels: Callable[[], Kernel], db: Path) -> None:
    first = kernels()
    s = first.activate("/p", "t1")
    first.crash()

    second = kernels()
    assert run(second.recovery.recover()) == [s.session_id]
    after_first = rows(db)
    assert run(second.recovery.recover()) == []
    assert rows(db) == after_first
    # and a third kernel after another restart finds nothing either
    second.crash()
    assert run(kernels().recovery.recover()) == []
    assert rows(db) == after_first


def _hold_write_lock(db: Path, kernel: Kernel) -> Callable[[], None]:
    holder = sqlite.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    kernel.conn.execute("PRAGMA busy_timeout = 50")  # fail fast instead of after 10 s

    def release() -> None:
        holder.execute("ROLLBACK")
        holder.close()

    return release


def _rename_table_away(db: Path) -> Callable[[], None]:
    other = sqlite.connect(db, isolation_level=None)
    other.execute("ALTER TABLE sessions RENAME TO sessions_elsewhere")

    def release() -> None:
        other.execute("ALTER TABLE sessions_elsewhere RENAME TO sessions")
        other.close()

    return release


@pytest.mark.parametrize("failure", ["write_locked", "readonly", "table_renamed"])
def test_recovery_with_database_error_raises_and_corrupts_nothing(
    kernels: Callable[[], Kernel], db: Path, failure: str
) -> None:
    first = kernels()
    s1 = first.activate("/p", "t1", context={"turn": 1}, process={"pid": 1, "start_time": -1})
    s2 = first.activate("/p", "t2", context={"turn": 5})
    run(first.manager.create("/p", "t3"))
    first.crash()
    before = rows(db)

    second = kernels()
    release: Callable[[], None]
    if failure == "write_locked":
        release = _hold_write_lock(db, second)
        recovery = second.recovery
    elif failure == "readonly":
        ro = sessions_on(open_vault_db(db, "sessions", readonly=True, factory=JournalConnection))
        recovery = CrashRecovery(ro)
        release = ro.close
    else:
        release = _rename_table_away(db)
        recovery = second.recovery

    try:
        with pytest.raises(VaultError) as info:
            run(recovery.recover(end_process=never_running))
    finally:
        release()
    err = info.value
    assert isinstance(err, PfarError)
    assert isinstance(err, SessionRecoveryFailed | SessionStoreError)
    assert str(db) in str(err)  # names the database
    if isinstance(err, SessionRecoveryFailed):
        assert err.session_id == s1.session_id and err.recovered == []
        assert "no session was changed" in str(err)
    assert rows(db) == before  # every session exactly as it was

    # once the database is healthy again, the same sessions are recovered
    assert run(second.recovery.recover(end_process=never_running)) == [s1.session_id, s2.session_id]
    assert asyncio.run(second.manager.get(s1.session_id)).context["turn"] == 1


# -- beyond the seed ---------------------------------------------------------------


def test_a_failure_midway_names_what_was_recovered_and_leaves_the_rest_whole(
    kernels: Callable[[], Kernel], db: Path
) -> None:
    first = kernels()
    s1 = first.activate("/p", "t1")
    s2 = first.activate("/p", "t2", context={"turn": 9}, process={"pid": 1, "start_time": -1})
    s3 = first.activate("/p", "t3")
    first.crash()
    conn = sqlite.connect(db, isolation_level=None)
    conn.execute(
        "CREATE TRIGGER refuse BEFORE UPDATE ON sessions WHEN old.session_id = "
        f"'{s2.session_id}' BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
    )
    s2_before = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (s2.session_id,))
    s2_row = s2_before.fetchone()

    second = kernels()
    with pytest.raises(SessionRecoveryFailed) as info:
        run(second.recovery.recover(end_process=never_running))
    assert info.value.session_id == s2.session_id
    assert info.value.recovered == [s1.session_id]
    assert "disk says no" in str(info.value) and s1.session_id in str(info.value)
    assert asyncio.run(second.manager.get(s1.session_id)).status is PAUSED
    # the failing session is whole: not half-paused, context and process as they were
    assert (
        conn.execute("SELECT * FROM sessions WHERE session_id = ?", (s2.session_id,)).fetchone()
        == s2_row
    )
    assert asyncio.run(second.manager.get(s3.session_id)).status is ACTIVE  # not reached: untouched

    conn.execute("DROP TRIGGER refuse")
    conn.close()
    assert run(second.recovery.recover(end_process=never_running)) == [s2.session_id, s3.session_id]


def test_a_session_moved_by_someone_else_meanwhile_is_left_alone(
    kernels: Callable[[], Kernel],
) -> None:
    first = kernels()
    s1 = first.activate("/p", "t1", process={"pid": 1, "start_time": -1})
    s2 = first.activate("/p", "t2")
    first.crash()
    second, bystander = kernels(), kernels()

    def end_and_race(process: dict[str, Any]) -> bool:
        # while recovery ends s1's process, another connection terminates s1
        # (from a thread of its own: recovery's event loop is busy calling this)
        racer = threading.Thread(
            target=run, args=(bystander.lifecycle.transition(s1.session_id, ACTIVE, TERMINATED),)
        )
        racer.start()
        racer.join()
        return False

    assert run(second.recovery.recover(end_process=end_and_race)) == [s2.session_id]
    assert asyncio.run(second.manager.get(s1.session_id)).status is TERMINATED
    assert "recovered_at" not in asyncio.run(second.manager.get(s1.session_id)).context


def test_a_recorded_process_that_is_gone_or_not_the_same_is_not_signalled(
    kernels: Callable[[], Kernel], tmp_path: Path
) -> None:
    async def scenario() -> None:
        first = kernels()
        s = await first.manager.create(str(tmp_path), "t1")
        agent = await agent_process.start(
            s.session_id, ["sleep", "60"], project_path=tmp_path, log_dir=tmp_path / "logs"
        )
        try:
            # the pid is the same, the start time is not: the OS reused the pid
            reused = {**agent.identity, "start_time": agent.identity["start_time"] + 1}
            await first.lifecycle.transition(s.session_id, CREATED, ACTIVE, process=reused)
            first.crash()
            second = kernels()
            assert await second.recovery.recover() == [s.session_id]
            got = await second.manager.get(s.session_id)
            assert "ended_orphan_pid" not in got.context and got.process is None
            assert agent_process.is_running(agent.identity)  # not touched
        finally:
            assert await agent_process.stop(agent.identity, timeout=5) == "terminated"
            await agent.wait()

    asyncio.run(scenario())


def test_an_orphaned_agent_process_is_ended_by_recover(
    kernels: Callable[[], Kernel], tmp_path: Path
) -> None:
    """The kernel dies without stopping its agent (`sleep 60` in its own group)."""

    async def scenario() -> None:
        first = kernels()
        s = await first.manager.create(str(tmp_path), "t1")
        agent = await agent_process.start(
            s.session_id, ["sleep", "60"], project_path=tmp_path, log_dir=tmp_path / "logs"
        )
        try:
            await first.lifecycle.transition(s.session_id, CREATED, ACTIVE, process=agent.identity)
            first.crash()  # ...and nobody stops the agent
            assert agent_process.is_running(agent.identity)

            second = kernels()
            assert await second.recovery.recover() == [s.session_id]
            assert await asyncio.wait_for(agent.wait(), 5) == -signal.SIGKILL
            got = await second.manager.get(s.session_id)
            assert got.status is PAUSED and got.process is None
            assert got.context["ended_orphan_pid"] == agent.pid
            assert "recovered_at" in got.context
        finally:
            if agent.proc.returncode is None:
                agent.proc.kill()
                await agent.wait()

    asyncio.run(scenario())


_KERNEL = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from pfar.journal.sessions import SessionLifecycle, SessionStatus
    from pfar.journal.sqlite import open_sessions
    from pfar.tools import agent_process

    async def main() -> None:
        db, project, logs = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
        manager = open_sessions(db)
        s = await manager.create(project, "thread-k")
        agent = await agent_process.start(
            s.session_id, ["sleep", "60"], project_path=project, log_dir=logs
        )
        await SessionLifecycle(manager).transition(
            s.session_id, SessionStatus.CREATED, SessionStatus.ACTIVE,
            context={"turn": 3}, process=agent.identity,
        )
        print(s.session_id, agent.pid, flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


def _wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_an_agent_orphaned_by_a_sigkilled_kernel_is_ended_at_the_next_start(
    db: Path, tmp_path: Path, kernels: Callable[[], Kernel]
) -> None:
    """A real kernel process starts an agent, records it, and is SIGKILLed."""
    kernel = subprocess.Popen(
        [sys.executable, "-c", _KERNEL, str(db), str(tmp_path), str(tmp_path / "logs")],
        stdout=subprocess.PIPE,
        text=True,
    )
    identity: dict[str, Any] = {}
    try:
        assert kernel.stdout is not None
        sid, pid = kernel.stdout.readline().split()
        kernel.send_signal(signal.SIGKILL)
        kernel.wait(timeout=10)
        started = start_time(int(pid))
        assert started is not None
        identity = {"pid": int(pid), "start_time": started}
        assert agent_process.is_running(identity)  # outlived its kernel
        assert os.getpgid(int(pid)) == int(pid)  # leads its own group

        nxt = kernels()
        crashed = asyncio.run(nxt.recovery.detect_crashed_sessions())
        assert [r.session_id for r in crashed] == [sid]
        assert crashed[0].process == {**identity, "argv": ["sleep", "60"]}
        assert run(nxt.recovery.recover()) == [sid]
        _wait_until(lambda: not agent_process.is_running(identity), 5, "the orphan to end")
        got = asyncio.run(nxt.manager.get(sid))
        assert got.status is PAUSED and got.process is None
        assert got.context["ended_orphan_pid"] == int(pid) and got.context["turn"] == 3
        assert run(nxt.recovery.recover()) == []
    finally:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
        if identity and agent_process.is_running(identity):
            os.killpg(identity["pid"], signal.SIGKILL)


def test_recovery_message_counts_sessions() -> None:
    assert recovery_message([]) == ""
    assert recovery_message(["a"]) == "Recovered 1 session after crash"
    assert recovery_message(["a", "b"]) == "Recovered 2 sessions after crash"
    assert recovery_message([str(i) for i in range(12)]) == "Recovered 12 sessions after crash"


# -- the agent process itself --------------------------------------------------------


def test_an_agent_runs_in_the_project_with_its_session_id_and_logs_both_streams(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()

    async def scenario() -> agent_process.AgentProcess:
        agent = await agent_process.start(
            "sess-1",
            ["sh", "-c", 'echo "id=$PFAR_SESSION_ID cwd=$(pwd) x=$X"; echo oops >&2'],
            project_path=project,
            log_dir=tmp_path / "logs",
            env={"X": "y"},
        )
        assert await agent.wait() == 0
        return agent

    agent = asyncio.run(scenario())
    assert agent.identity["argv"][0] == "sh"
    assert set(agent.identity) == {"pid", "start_time", "argv"}
    assert agent.log_path == tmp_path / "logs" / "sess-1.log"
    log = agent.log_path.read_text()
    assert f"id=sess-1 cwd={project} x=y" in log and "oops" in log
    assert oct(agent.log_path.stat().st_mode & 0o777) == oct(0o600)


def test_an_agent_that_ends_at_once_is_an_agent_that_ended_not_a_failure_to_start(
    tmp_path: Path,
) -> None:
    # `true` is often reaped before its start time can be read; it still started and
    # ended with its code, and its record names no process anyone may signal later.
    async def scenario() -> list[agent_process.AgentProcess]:
        agents = []
        for i in range(20):
            agent = await agent_process.start(
                f"s{i}", ["true"], project_path=tmp_path, log_dir=tmp_path / "logs"
            )
            assert await agent.wait() == 0
            agents.append(agent)
        return agents

    for agent in asyncio.run(scenario()):
        assert set(agent.identity) == {"pid", "start_time", "argv"}
        if agent.identity["start_time"] is None:
            assert asyncio.run(agent_process.stop(agent.identity)) == "not_running"


def test_an_agent_that_cannot_start_is_a_tool_error(tmp_path: Path) -> None:
    from pfar.errors import ToolFailed

    async def start(argv: list[str], project: Path) -> None:
        await agent_process.start("s", argv, project_path=project, log_dir=tmp_path)

    with pytest.raises(ToolFailed, match="no-such-agent-binary"):
        asyncio.run(start(["no-such-agent-binary"], tmp_path))
    with pytest.raises(ToolFailed, match="not a directory"):
        asyncio.run(start(["true"], tmp_path / "missing"))
    with pytest.raises(ToolFailed, match="argv"):
        asyncio.run(start([], tmp_path))


def test_stop_terminates_then_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    async def scenario() -> None:
        polite = await agent_process.start(
            "polite", ["sleep", "60"], project_path=tmp_path, log_dir=tmp_path
        )
        assert await agent_process.stop(polite.identity, timeout=5) == "terminated"
        assert await polite.wait() == -signal.SIGTERM
        assert await agent_process.stop(polite.identity, timeout=5) == "not_running"

        # the leader obeys SIGTERM, a child it started ignores it: the group is killed
        stubborn = await agent_process.start(
            "stubborn",
            ["sh", "-c", "(trap '' TERM; exec sleep 60) & echo started; exec sleep 61"],
            project_path=tmp_path,
            log_dir=tmp_path,
        )
        _wait_until(lambda: len(agent_process.group_members(stubborn.pid)) == 2, 5, "child")
        members = agent_process.group_members(stubborn.pid)
        t0 = time.monotonic()
        assert await agent_process.stop(stubborn.identity, timeout=0.3) == "killed"
        assert time.monotonic() - t0 < 5
        assert agent_process.group_members(stubborn.pid) == []
        for pid in members:
            assert not agent_process.is_running({"pid": pid, "start_time": start_time(pid)})
        await stubborn.wait()

    asyncio.run(scenario())
