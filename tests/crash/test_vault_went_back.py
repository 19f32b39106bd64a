"""A journal that went back in time, through the real `pfar` command and kernel: the
issue's scenario (ten tasks, `kill -9`, `sessions.db-wal` deleted, seven left) is
refused at the next start, naming the lost tasks, until `pfar vault accept-loss`; a
restore is reported; and no start that lost nothing is refused (a clean stop, a kill
in a busy run, a kill at a commit, pruned history, a missing record)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pfar.vault import keys
from pfar.vault.driver import sqlite
from pfar.vault.home import Home

from ..support import (
    KernelProcess,
    make_home,
    owner_messages,
    pfar,
    running_kernel,
    said,
    vault_db,
    wait_for,
)

pytestmark = pytest.mark.crash

SLOW = 'id = "slow"\ndescription = "A slow command"\nallowed_tools = ["shell.run"]\n'
SLOW_SCRIPT = textwrap.dedent(
    """
    [[responses]]
    template = "slow"
    phase = "plan"
    json = { steps = [ { tool = "shell.run", args = { argv = ["sleep", "2"] } } ] }
    """
)


def _home(tmp_path: Path, config: str | None = None) -> Home:
    home = make_home(tmp_path / "home", templates={"slow": SLOW}, config=config, examples=True)
    with open(home.root / "scripts" / "default.toml", "a") as f:
        f.write(SLOW_SCRIPT)
    return home


def _note(home: Home, text: str) -> str:
    """A task run to its end through the CLI; its id."""
    r = pfar(home, "submit", "note", text, "--wait", "--json")
    assert r.returncode == 0, said(r)
    return str(json.loads(r.stdout)["task_id"])


def _task_ids(home: Home) -> set[str]:
    r = pfar(home, "tasks", "--json", "--limit", "1000")
    assert r.returncode == 0, said(r)
    return {t["task_id"] for t in json.loads(r.stdout)}


def _reports(home: Home) -> list[str]:
    return [m["body"] for m in owner_messages(home) if m["kind"] == "report"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(home: Home) -> dict[str, object]:
    return dict(json.loads((home.vault_dir / "acknowledged").read_text()))


def _starts(home: Home) -> str:
    """Start a kernel, stop it cleanly; what it printed (it must start)."""
    with running_kernel(home) as k:
        pass
    return k.output()


@contextlib.contextmanager
def _pinned(home: Home) -> Iterator[None]:
    """Checkpoint the journal now, then hold a read snapshot so that nothing written
    after this point reaches sessions.db until the snapshot ends: what comes after is
    in sessions.db-wal alone. The snapshot's connection is read-only, so closing it
    after the kernel is gone does not checkpoint the log into the file either."""
    with contextlib.closing(vault_db(home, isolation_level=None)) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0
    pin = sqlite.connect(f"file:{home.sessions_db}?mode=ro", uri=True, isolation_level=None)
    key = keys.unlock(home)
    if key is not None:
        pin.execute(f"PRAGMA key = {key.pragma()}")
    pin.execute("BEGIN")
    pin.execute("SELECT count(*) FROM task_journal").fetchone()
    try:
        yield
    finally:
        pin.execute("COMMIT")
        pin.close()


def test_ten_tasks_a_kill_and_a_deleted_wal_are_refused_until_the_loss_is_accepted(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path)
    k = KernelProcess(home)
    k.wait_ready()
    kept = [_note(home, f"kept {i}") for i in range(7)]
    with _pinned(home):
        lost = [_note(home, f"lost {i}") for i in range(3)]
        # the audit log is written out each second: the lost tasks are in it before the kill
        wait_for(lambda: all(t in home.audit_log.read_text() for t in lost), what="audit records")
        k.kill()
    Path(f"{home.sessions_db}-wal").unlink()

    assert _task_ids(home) == set(kept)  # the journal went back to seven tasks
    before = _sha(home.sessions_db)
    r = pfar(home, "run", "--no-stdin")
    text = said(r)
    assert r.returncode != 0, text
    assert "Traceback" not in text, text
    assert f"{home.sessions_db} went back in time" in text, text
    for task_id in lost:
        assert task_id in text, text
    for task_id in kept:
        assert task_id not in text, text
    assert "pfar vault restore" in text and "pfar vault accept-loss" in text, text
    assert _sha(home.sessions_db) == before  # the refused start wrote nothing
    assert "No pending tasks to recover" not in text

    r = pfar(home, "run", "--no-stdin")  # refused again: nothing was reset by refusing
    assert r.returncode != 0 and "went back in time" in said(r), said(r)

    r = pfar(home, "vault", "accept-loss")
    assert r.returncode == 0, said(r)
    for task_id in lost:
        assert task_id in said(r), said(r)
    assert "vault_loss_accepted" in home.audit_log.read_text()

    with running_kernel(home) as k2:
        report = wait_for(lambda: [b for b in _reports(home) if "accept-loss" in b])[-1]
        assert "was accepted" in report, report
        for task_id in lost:
            assert task_id[:8] in report, report
        events = [json.loads(line) for line in pfar(home, "events", "--json").stdout.splitlines()]
        accepted = [e for e in events if e["kind"] == "VaultLossAccepted"]
        assert len(accepted) == 1, events
        assert sorted(accepted[0]["tasks"]) == sorted(lost)
        # the numbering goes on past the lost events: none is given twice
        first, last = accepted[0]["events"]
        assert accepted[0]["seq"] == last + 1 and first <= last
        after = _note(home, "after the loss")
        assert after in _task_ids(home)
    assert k2.proc.returncode == 0

    # said once: the next start has nothing to say about the vault
    _starts(home)
    assert "accept-loss" not in _reports(home)[-1]


def test_a_second_accept_loss_finds_nothing_to_accept(tmp_path: Path) -> None:
    home = _home(tmp_path)
    with running_kernel(home):
        _note(home, "one")
    record = _record(home)
    r = pfar(home, "vault", "accept-loss")
    assert r.returncode == 0 and "nothing to accept" in said(r), said(r)
    assert _record(home) == record


def test_accept_loss_is_refused_while_a_kernel_runs(tmp_path: Path) -> None:
    home = _home(tmp_path)
    with running_kernel(home):
        r = pfar(home, "vault", "accept-loss")
        assert r.returncode != 0 and "owned by a running kernel" in said(r), said(r)


def test_no_false_alarm_after_a_clean_stop(tmp_path: Path) -> None:
    home = _home(tmp_path)
    with running_kernel(home):
        ids = [_note(home, f"n{i}") for i in range(3)]
    position = _record(home)["position"]
    assert isinstance(position, int) and position >= 3 * 3  # created, started, completed
    output = _starts(home)
    assert "went back" not in output
    assert _task_ids(home) == set(ids)
    assert _reports(home)[-1] == "System restarted. No pending tasks to recover."


@pytest.mark.parametrize("fault", [None, "task_created:6", "completed:2"])
def test_no_false_alarm_after_a_kill_in_a_busy_run(tmp_path: Path, fault: str | None) -> None:
    home = _home(tmp_path)
    k = KernelProcess(home, fault=fault)
    k.wait_ready()
    for i in range(16):
        with contextlib.suppress(Exception):  # a fault kills the kernel under the call
            k.request("submit", template="slow", text=f"s{i}", event_id=str(uuid.uuid4()))
    if fault is None:
        with contextlib.closing(vault_db(home)) as conn:
            wait_for(
                lambda: (
                    conn.execute(
                        "SELECT count(*) FROM task_steps WHERE status = 'started'"
                    ).fetchone()[0]
                    >= 4
                ),
                what="commands running",
            )
        k.kill()
    else:
        assert k.killed_by_fault()
    with running_kernel(home) as k2:
        report = wait_for(lambda: len(_reports(home)) >= 2 and _reports(home)[-1])
        assert "went back" not in report
    assert "went back" not in k2.output()


def test_no_false_alarm_after_pruning(tmp_path: Path) -> None:
    # every finished task and its events go at the next start's cleanup
    config = (
        "[recovery]\njournal_retention_completed_hours = 0\njournal_retention_failed_days = 0\n"
    )
    home = _home(tmp_path, config)
    with running_kernel(home):
        ids = [_note(home, f"n{i}") for i in range(3)]
    position = _record(home)["position"]
    k = KernelProcess(home)
    k.wait_ready()
    assert not _task_ids(home) & set(ids)  # pruned at start
    with contextlib.closing(vault_db(home)) as conn:
        assert conn.execute("SELECT count(*) FROM bus_events").fetchone()[0] == 0
    k.kill()  # and killed with the pruning in the write-ahead log
    output = _starts(home)
    assert "went back" not in output
    assert _record(home)["position"] == position


def test_a_missing_record_is_no_loss_and_is_made_again(tmp_path: Path) -> None:
    home = _home(tmp_path)
    with running_kernel(home):
        _note(home, "one")
    (home.vault_dir / "acknowledged").unlink()  # as a home an older pfar ran has none
    _starts(home)
    assert _record(home)["position"] == 3


def test_an_unreadable_record_is_refused_and_accept_loss_makes_a_fresh_one(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path)
    with running_kernel(home):
        _note(home, "one")
    (home.vault_dir / "acknowledged").write_bytes(b"\x00" * 512)
    r = pfar(home, "run", "--no-stdin")
    assert r.returncode != 0, said(r)
    assert "acknowledged cannot be read" in said(r), said(r)
    r = pfar(home, "vault", "accept-loss")
    assert r.returncode == 0 and "unreadable record" in said(r), said(r)
    _starts(home)
    assert "could not be read" in _reports(home)[-1]


def test_a_journal_behind_after_a_power_cut_under_normal_sync_is_reported_not_refused(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path, '[vault]\nsynchronous = "NORMAL"\n')
    with running_kernel(home):
        _note(home, "one")
    # as a record written before the machine restarted, ahead of the journal: what
    # synchronous = "NORMAL" allows a power cut to lose (a real cut cannot be had here)
    record = _record(home)
    record.update(position=int(str(record["position"])) + 4, machine_boot=str(uuid.uuid4()))
    (home.vault_dir / "acknowledged").write_text(json.dumps(record).ljust(511) + "\n")
    _starts(home)
    report = _reports(home)[-1]
    assert "after the machine restarted" in report and "NORMAL" in report, report
    assert "vault_lost_at_power_cut" in home.audit_log.read_text()


def test_a_restored_vault_reports_the_backup_and_what_was_lost_since(tmp_path: Path) -> None:
    home = _home(tmp_path)
    with running_kernel(home):
        kept = [_note(home, f"kept {i}") for i in range(2)]
    backup = tmp_path / "backup"
    backup.mkdir()
    for name in ("sessions.db", "secrets.db", "memory.db"):  # stopped cleanly: checkpointed
        (backup / name).write_bytes((home.vault_dir / name).read_bytes())
    made = _record(home)
    with running_kernel(home):
        lost = [_note(home, f"lost {i}") for i in range(2)]
    previous = _record(home)
    # what `pfar vault restore` does: the backup's files back, the record gone, and
    # restored.json for the next start to tell
    for name in ("sessions.db", "secrets.db", "memory.db"):
        (home.vault_dir / name).write_bytes((backup / name).read_bytes())
    (home.vault_dir / "acknowledged").unlink()
    restored = home.vault_dir / "restored.json"
    restored.write_text(
        json.dumps(
            {
                "backup": {
                    "made_at": "2030-01-02T03:04:05Z",
                    "position": made["position"],
                    "tasks": 2,
                },
                "previous": previous,
                "restored_at": "2030-01-03T00:00:00Z",
            }
        )
    )

    _starts(home)
    report = _reports(home)[-1]
    assert "restored from the backup made at 2030-01-02T03:04:05Z" in report, report
    assert "tasks are as of that backup (2 tasks)" in report, report
    assert f"events {int(str(made['position'])) + 1}–{previous['position']}" in report, report
    for task_id in lost:
        assert task_id[:8] in report, report
    for task_id in kept:
        assert task_id[:8] not in report, report
    assert not restored.exists()  # told once
    assert "vault_restored" in home.audit_log.read_text()
    _starts(home)
    assert "restored" not in _reports(home)[-1]
