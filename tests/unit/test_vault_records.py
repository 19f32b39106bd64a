"""The files the vault's start checks read and write beside the databases:
`vault/acknowledged` (one sector, rewritten in place), `vault/restored.json` (left by a
restore) and the page numbers a write-ahead log holds frames for."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pfar.vault import acknowledged, restored
from pfar.vault.acknowledged import Acknowledged, AcknowledgedFile, AuditMark, Unreadable
from pfar.vault.driver import sqlite
from pfar.vault.integrity import wal_pages

RECORD = Acknowledged(
    41,
    977,
    "2030-01-02T03:04:05.000006Z",
    "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
    "17f51999-f95a-48ed-8c67-8829ae5d1b06",
    "FULL",
    AuditMark(1234, "ab" * 32),
)


def test_a_record_is_one_sector_and_reads_back_as_written(tmp_path: Path) -> None:
    data = acknowledged.encode(RECORD)
    assert len(data) == acknowledged.SIZE and data.endswith(b"\n")
    acknowledged.replace(tmp_path, RECORD)
    assert acknowledged.read(tmp_path) == RECORD
    assert os.stat(tmp_path / "acknowledged").st_mode & 0o777 == 0o600


def test_a_record_rewritten_in_place_shorter_leaves_nothing_of_the_longer(
    tmp_path: Path,
) -> None:
    f = AcknowledgedFile(tmp_path, RECORD)
    shorter = Acknowledged(7, 8, "t", "b", "m", "NORMAL", None)
    f.write(acknowledged.encode(shorter))
    f.close()
    assert acknowledged.read(tmp_path) == shorter
    assert (tmp_path / "acknowledged").stat().st_size == acknowledged.SIZE


def test_no_record_is_none_and_a_damaged_one_is_unreadable(tmp_path: Path) -> None:
    assert acknowledged.read(tmp_path) is None
    for content in (b"\x00" * 512, b"[1, 2]", b'{"position": -1}', b'{"position": "7"}'):
        (tmp_path / "acknowledged").write_bytes(content)
        found = acknowledged.read(tmp_path)
        assert isinstance(found, Unreadable), content


def test_restored_json_as_a_restore_writes_it(tmp_path: Path) -> None:
    (tmp_path / "restored.json").write_text(
        json.dumps(
            {
                "backup": {"made_at": "2030-01-01T00:00:00Z", "position": 30, "tasks": 12},
                "previous": RECORD.to_json(),
                "restored_at": "2030-01-02T00:00:00Z",
            }
        )
    )
    found = restored.read(tmp_path)
    assert found is not None and found.problem is None
    assert (found.made_at, found.position, found.tasks) == ("2030-01-01T00:00:00Z", 30, 12)
    assert found.previous == RECORD
    assert found.lost == (31, 41)
    restored.remove(found)
    assert restored.read(tmp_path) is None


@pytest.mark.parametrize(
    ("previous", "position", "lost"),
    [(None, 30, None), (10, 30, None), (30, 30, None), (31, None, None), (31, 30, (31, 31))],
)
def test_what_a_restore_lost(
    tmp_path: Path, previous: int | None, position: int | None, lost: tuple[int, int] | None
) -> None:
    record = None if previous is None else {**RECORD.to_json(), "position": previous}
    backup = {"made_at": "x"} if position is None else {"made_at": "x", "position": position}
    (tmp_path / "restored.json").write_text(
        json.dumps({"backup": backup, "previous": record, "restored_at": "y"})
    )
    found = restored.read(tmp_path)
    assert found is not None and found.lost == lost


def test_a_restored_json_that_is_not_json_is_still_a_restore(tmp_path: Path) -> None:
    (tmp_path / "restored.json").write_text("{cut off")
    found = restored.read(tmp_path)
    assert found is not None and found.problem is not None and "not JSON" in found.problem


def test_the_pages_a_write_ahead_log_holds(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    conn = sqlite.connect(str(db), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (zeroblob(20000))")  # a row over several pages
    pages = wal_pages(Path(f"{db}-wal"))
    count = int(conn.execute("PRAGMA page_count").fetchone()[0])
    conn.close()
    assert pages == set(range(1, count + 1))
    assert wal_pages(tmp_path / "none-wal") == set()
