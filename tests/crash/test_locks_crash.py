"""Resource locks across processes (seed 001, "Lock Recovery"), with real processes on
one home's lock table:

* a kernel SIGKILLed while its tool call holds a lock: the next kernel finds the
  holder process gone, lets the lock go, and the task goes on;
* another kernel's process holds a lock and lives, but stopped renewing its lease:
  the kernel's call waits (shown in `pfar tasks`), and takes the lock once the lease
  has expired, while that process still runs;
* that process is SIGKILLed with a long lease left: its lock is stale, and taken at
  once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pfar.vault.home import Home

from ..support import make_home, pfar, read_journal, task_states, wait_for
from .test_regressions import kernel

# every test here runs on each journal backend
pytestmark = [pytest.mark.crash, pytest.mark.both_backends]

# another kernel's process, as the lock table sees it: it takes a lock on FILE for a
# lease of LEASE seconds, says so, and lives on without renewing it
HOLDER = textwrap.dedent(
    """
    import asyncio, os, socket, sys, time
    from pathlib import Path
    from pfar.config import Config
    from pfar.journal.locks_sql import LockClaim, LockOwner
    from pfar.journal.open_store import open_store
    from pfar.tools.processes import start_time
    from pfar.vault import keys
    from pfar.vault.home import Home

    home, name, lease = Home(Path(sys.argv[1])), sys.argv[2], float(sys.argv[3])

    async def hold():
        config = Config.load(home.config)
        journal = await open_store(home, config.vault, key=keys.unlock(home))
        try:
            pid = os.getpid()
            owner = LockOwner("other-boot", socket.gethostname(), pid, start_time(pid))
            claim = LockClaim("file", name, "exclusive")
            in_the_way, _ = await journal.locks.acquire(
                [claim], "other-task:0", "other-task", owner, lease, lambda pid, started: True
            )
            assert in_the_way is None, in_the_way
        finally:
            await journal.aclose()

    asyncio.run(hold())
    print("held", flush=True)
    time.sleep(600)
    """
)


def _home(tmp_path: Path, config: str = "") -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        text = "Writing."
        tool_calls = [{ name = "Write", input = { file_path = "same.txt", content = "mine" } }]

        [[turns]]
        text = "Done: $last"
        """
    )
    config = '[loop]\ntools = ["Write"]\nalways_allow = ["Write"]\n' + config
    return make_home(tmp_path / "home", script=script, config=config), work


def _holder(home: Home, file: Path, lease: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home.root), str(file.resolve()), str(lease)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _state(home: Home) -> str:
    found = list(task_states(home).values())
    return found[0] if found else ""


def _locks(home: Home) -> list[tuple[str, int]]:
    return [(h.holder, h.pid) for h in read_journal(home, lambda s: s.locks.held())]


SLOW_HOOK = '[[hooks]]\npoint = "PostToolUse"\ncommand = "sleep 60"\ntimeout_seconds = 120\n'


def test_a_lock_of_a_killed_kernel_is_let_go_by_the_next(tmp_path: Path) -> None:
    # the call holds its lock while a slow PostToolUse handler looks at it: killed then
    home, work = _home(tmp_path, SLOW_HOOK)
    with kernel(home) as k:
        k.request("loop", prompt="write it", directory=str(work), once=True, event_id="w-1")
        wait_for(lambda: _locks(home), timeout=30, what="the lock journaled")
        ((holder, pid),) = _locks(home)
        assert pid == k.proc.pid
        k.proc.send_signal(signal.SIGKILL)
        k.proc.wait(timeout=10)
    assert _locks(home) == [(holder, pid)]  # left behind, with a holder that is gone

    # the slow handler goes; the rest of the config (where the journal is) stays
    home.config.write_text(home.config.read_text().replace(SLOW_HOOK, ""))
    home.config.chmod(0o600)
    with kernel(home) as k:
        wait_for(lambda: _state(home) in ("Completed", "AwaitingApproval"), timeout=30)
        assert not [h for h, p in _locks(home) if p == pid]
        assert k.terminate() == 0  # a clean stop writes the audit log out
    audit = home.audit_log.read_text()
    assert '"stale_locks_released"' in audit


def test_a_live_holder_elsewhere_is_waited_on_until_its_lease_expires(tmp_path: Path) -> None:
    home, work = _home(tmp_path)
    with kernel(home):
        pass  # the home's journal exists with its tables
    # long enough for a kernel to start and its task to reach the lock on a busy machine
    other = _holder(home, work / "same.txt", lease=10)
    try:
        with kernel(home) as k:
            k.request("loop", prompt="write it", directory=str(work), once=True, event_id="w-2")
            shown: list[dict[str, Any]] = []

            def blocked() -> bool:
                listed = json.loads(pfar(home, "tasks", "--json").stdout or "[]")
                shown[:] = [t for t in listed if t.get("waiting_for")]
                return bool(shown)

            wait_for(blocked, timeout=30, what="the task shown waiting for the lock")
            listed = shown  # as it was listed while it waited (the lease ends meanwhile)
            assert "held by task other-ta" in listed[0]["waiting_for"]
            assert listed[0]["waiting_for"].startswith(
                f"lock: file {(work / 'same.txt').resolve()}"
            )
            assert not (work / "same.txt").exists()  # nothing written while it waits
            wait_for(lambda: _state(home) == "Completed", timeout=60)
            assert other.poll() is None  # taken by the lease's end, not by a death
            assert (work / "same.txt").read_text() == "mine"
            assert [h for h, _ in _locks(home) if h.startswith("other")] == []
            assert "waiting_for" in json.loads(pfar(home, "tasks", "--json").stdout)[0]
            assert json.loads(pfar(home, "tasks", "--json").stdout)[0]["waiting_for"] is None
    finally:
        other.kill()
        other.wait()


def test_a_lock_of_a_killed_process_elsewhere_is_taken_at_once(tmp_path: Path) -> None:
    # a lease far longer than the call's lock timeout: had the call waited for the
    # lease, its result would be "Resource locked by another task" and nothing written
    home, work = _home(tmp_path, "[scheduler]\nlock_timeout_seconds = 30\n")
    with kernel(home) as k:
        other = _holder(home, work / "same.txt", lease=3600)
        other.send_signal(signal.SIGKILL)
        other.wait()
        k.request("loop", prompt="write it", directory=str(work), once=True, event_id="w-3")
        wait_for(lambda: _state(home) in ("Completed", "Failed"), timeout=60)
    assert _state(home) == "Completed"
    assert (work / "same.txt").read_text() == "mine"
    assert _locks(home) == []
