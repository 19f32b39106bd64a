"""The vault's integrity check at start: `PRAGMA quick_check` on each database, and
`PRAGMA cipher_integrity_check` (every page's HMAC) when the vault is encrypted.

Each check runs on a read-only connection of its own: SQLCipher's codec keeps an
error once a page fails its HMAC, and every later read on that connection fails
with it, so one finding must not hide the next check's. Nothing here writes to a
database; the outcome goes to `vault/last-check.json` (what `pfar vault status`
shows), replaced whole.

quick_check reads every page in use through the write-ahead log; the HMAC check reads
the database file alone. A page the file holds torn (a power cut in the middle of a
checkpoint) but whose good copy the write-ahead log still holds is no damage: SQLite
writes it again from the log at the next checkpoint. Such pages are left out of the
HMAC check's findings (`wal_pages`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import PfarError, VaultCorrupt
from .driver import sqlite
from .keys import VaultKey
from .sqlite import connect_at_rest, recovery_advice

LAST_CHECK = "last-check.json"
# findings kept per check: past the first damaged page, SQLCipher fails every read of
# the connection, so the rest of quick_check's lines only repeat it
MAX_FINDINGS = 10
SHOWN = 3  # findings a message names; the file keeps MAX_FINDINGS
# a larger page cache than SQLite's default: quick_check revisits interior pages, and
# decrypting one again costs more than keeping it (measured: 0.70 s -> 0.55 s on 113 MB)
CACHE_KIB = 16 * 1024
VAULT_FILES = ("sessions.db", "secrets.db", "memory.db")

_TREE = re.compile(r"\bTree (\d+)\b")
_ECHO = "unable to get the page. error code=1"
_HMAC_PAGE = re.compile(r"HMAC verification failed for page (\d+)")


@dataclass(frozen=True, slots=True)
class FileCheck:
    """One database's check: which checks ran, what they found (empty: all is well)."""

    name: str
    checks: tuple[str, ...]
    findings: tuple[str, ...] = ()
    seconds: float = 0.0
    # why the file could not be opened at all (not a database, the wrong key, not
    # writable): said as it is, since its message already names the file and the fix
    unopened: PfarError | None = None

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": list(self.checks),
            "findings": list(self.findings),
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class VaultCheck:
    at: str
    files: dict[str, FileCheck] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "ok": self.ok,
            "files": {name: f.to_json() for name, f in self.files.items()},
        }

    def refusal(self, vault_dir: Path) -> PfarError | None:
        """The error that stops a kernel on this vault, naming each damaged file and
        what was found in it; None when every file passed."""
        bad = [f for f in self.files.values() if not f.ok]
        if not bad:
            return None
        for f in bad:
            if f.unopened is not None:
                return f.unopened
        said = []
        for f in bad:
            shown = "; ".join(f.findings[:SHOWN])
            more = len(f.findings) - SHOWN
            said.append(
                f"{vault_dir / f.name} is damaged ({shown}"
                + (f"; and {more} more)" if more > 0 else ")")
            )
        first = vault_dir / bad[0].name
        return VaultCorrupt(
            f"{'; '.join(said)}: found by the vault's integrity check, and pfar wrote "
            f"nothing to the vault. {recovery_advice(first)} Commands that only read "
            "(`pfar tasks`, `pfar task show`) still show what can be read; "
            f"{vault_dir / LAST_CHECK} has every finding."
        )


def check_vault(vault_dir: Path, key: VaultKey | None) -> VaultCheck:
    """Check each vault database that exists (memory.db is made on first use)."""
    at = datetime.now(UTC).isoformat()
    files = {
        name: check_file(vault_dir / name, key)
        for name in VAULT_FILES
        if (vault_dir / name).exists()
    }
    return VaultCheck(at, files)


def check_file(path: Path, key: VaultKey | None) -> FileCheck:
    started = time.perf_counter()
    checks = ("quick_check", "cipher_integrity_check") if key is not None else ("quick_check",)
    try:
        with reading(path, key):
            pass
    except PfarError as exc:
        finding = f"cannot be opened: {_first_line(exc)}"
        return FileCheck(path.name, (), (finding,), time.perf_counter() - started, exc)
    findings = _quick_check(path, key)
    if key is not None:
        # the HMAC check names the damaged page itself: said first
        findings = _cipher_check(path, key) + _past_first_failure(findings)
    return FileCheck(path.name, checks, tuple(findings), time.perf_counter() - started)


def _quick_check(path: Path, key: VaultKey | None) -> list[str]:
    try:
        with reading(path, key) as conn:
            rows = conn.execute(f"PRAGMA quick_check({MAX_FINDINGS})").fetchall()
    except (PfarError, sqlite.Error, MemoryError) as exc:  # SQLCipher: MemoryError, at times
        return [f"quick_check: {_first_line(exc)}"]
    lines = [
        line.strip()
        for row in rows
        for line in str(row[0]).splitlines()
        if line.strip() and not line.startswith("***")
    ]
    if lines == ["ok"]:
        return []
    tables = _tables(path, key)
    return [f"quick_check: {_named(line, tables)}" for line in lines[:MAX_FINDINGS]]


def _past_first_failure(findings: list[str]) -> list[str]:
    """quick_check's findings on an encrypted file, without the echoes of the first:
    once a page fails its HMAC, SQLCipher fails every later read of the connection
    ("unable to get the page. error code=1"), whatever those pages hold."""
    if not findings:
        return findings
    rest = [f for f in findings[1:] if not f.endswith(_ECHO) and _ECHO + " (" not in f]
    return [findings[0], *rest]


def _cipher_check(path: Path, key: VaultKey) -> list[str]:
    try:
        with reading(path, key) as conn:
            rows = conn.execute("PRAGMA cipher_integrity_check").fetchall()
    except (PfarError, sqlite.Error, MemoryError) as exc:
        return [f"cipher_integrity_check: {_first_line(exc)}"]
    found = [str(r[0]) for r in rows]
    if not found:
        return []
    superseded = wal_pages(Path(f"{path}-wal"))
    kept = []
    for line in found:
        page = _HMAC_PAGE.search(line)
        if page is not None and int(page.group(1)) in superseded:
            continue  # torn in the file, whole in the log: the next checkpoint rewrites it
        kept.append(f"cipher_integrity_check: {line}")
    return kept[:MAX_FINDINGS]


@contextlib.contextmanager
def reading(path: Path, key: VaultKey | None) -> Iterator[sqlite.Connection]:
    """A read-only connection to `path` that leaves no -wal or -shm beside a file that
    had none (connect_at_rest); never a read-write one, which would checkpoint, when it
    closes last, a write-ahead log into a file that may be damaged."""
    conn = connect_at_rest(path, key=key)
    try:
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        yield conn
    finally:
        conn.close()


def _tables(path: Path, key: VaultKey | None) -> dict[int, str]:
    """Root page -> table or index name, to say what a finding's "Tree N" is."""
    try:
        with reading(path, key) as conn:
            return {
                int(r[0]): str(r[1])
                for r in conn.execute("SELECT rootpage, name FROM sqlite_master WHERE rootpage")
            }
    except (PfarError, sqlite.Error, MemoryError):
        return {}


def _named(line: str, tables: dict[int, str]) -> str:
    tree = _TREE.search(line)
    if tree is None or int(tree.group(1)) not in tables:
        return line
    return f"{line} ({tables[int(tree.group(1))]})"


def _first_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


_WAL_MAGIC = (0x377F0682, 0x377F0683)


def wal_pages(wal: Path) -> set[int]:
    """The page numbers the write-ahead log `wal` holds frames for, under its current
    salt (frames of an earlier generation of the log are left out). The log's headers
    are SQLite's own and are not encrypted; only the pages in its frames are."""
    try:
        with open(wal, "rb") as f:
            header = f.read(32)
            if len(header) < 32:
                return set()
            magic, _, page_size, _, salt1, salt2 = struct.unpack(">6I", header[:24])
            if magic not in _WAL_MAGIC or not 512 <= page_size <= 65536:
                return set()
            pages = set()
            while frame := f.read(24):
                if len(frame) < 24:
                    break
                page, _, s1, s2 = struct.unpack(">4I", frame[:16])
                if (s1, s2) == (salt1, salt2):
                    pages.add(page)
                f.seek(page_size, os.SEEK_CUR)
            return pages
    except OSError:
        return set()


def write_last_check(vault_dir: Path, check: VaultCheck) -> None:
    """`vault/last-check.json`, replaced whole (a reader never sees half of it). A
    failure to write it is no reason to stop: it is a report, not the vault."""
    path = vault_dir / LAST_CHECK
    tmp = path.with_name(f".{LAST_CHECK}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(check.to_json(), f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def read_last_check(vault_dir: Path) -> dict[str, Any] | None:
    """The last check's outcome as written, or None when there was none."""
    try:
        value = json.loads((vault_dir / LAST_CHECK).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
