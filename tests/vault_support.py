"""Vaults for the encryption tests: a plain home with real work in every file, what a
vault holds row by row, and what its files are byte by byte."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from pfar.vault import keys
from pfar.vault.driver import sqlite
from pfar.vault.home import Home
from pfar.vault.knowledge import KnowledgeStore

from .support import pfar, running_kernel, said

CANARY = "canary-" + "5f0c1e7a9b2d4c6e8a0b1c3d5e7f9a1b"  # a secret's value: found nowhere in clear
DBS = ("sessions.db", "secrets.db", "memory.db")


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, said(proc)
    return proc.stdout


def populated_plain_home(root: Path) -> Home:
    """`pfar init --no-encrypt`, then work in every vault file: tasks run by a kernel
    (sessions.db), a secret (secrets.db), a learning in the full-text index
    (memory.db)."""
    home = Home(root)
    ok(pfar(home, "init", "--no-encrypt"))
    with running_kernel(home):
        ok(pfar(home, "secret", "set", "canary", stdin=CANARY))
        for n in range(3):
            ok(pfar(home, "submit", "note", f"note number {n}", "--wait"))
    store = KnowledgeStore.open(home.memory_db)
    try:
        store.add("the staging server is called quokka", None, ("servers",), "2026-01-01")
    finally:
        store.close()
    for leftover in root.glob("kernel-*.out"):
        leftover.unlink()
    return home


def copy_home(src: Home, dest: Path) -> Home:
    shutil.copytree(src.root, dest, symlinks=True)
    return Home(dest)


def dump(home: Home, key: keys.VaultKey | None = None) -> dict[str, Any]:
    """Every vault file's schema, rows and AUTOINCREMENT high-water marks, read with
    `key` (or the vault's own): two vaults with the same dump hold the same data."""
    if key is None:
        keys.forget(home)
        key = keys.unlock(home)
    found: dict[str, Any] = {}
    for name in DBS:
        conn = sqlite.connect(str(home.vault_dir / name))
        try:
            if key is not None:
                conn.execute(f"PRAGMA key = {key.pragma()}")
            schema = sorted(
                tuple(map(str, r))
                for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
            )
            tables = [r[1] for r in schema if r[0] == "table"]
            rows = {
                t: sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{t}"')) for t in tables
            }
        finally:
            conn.close()
        found[name] = {"schema": schema, "rows": rows}
    return found


# what a start's vault checks write about themselves: never a vault file
CHECK_RECORD = "last-check.json"


def file_states(home: Home) -> dict[str, tuple[str, int, int]]:
    """Every file under the vault directory (but the start-up check's own record of what
    it found): its digest, mode and modification time."""
    states = {}
    for path in sorted(home.vault_dir.rglob("*")):
        if path.is_file() and path.name != CHECK_RECORD:
            st = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            states[str(path.relative_to(home.root))] = (digest, st.st_mode, st.st_mtime_ns)
    return states


def is_plain(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def unlock_json(home: Home) -> dict[str, Any]:
    return json.loads((home.vault_dir / "unlock.json").read_text())  # type: ignore[no-any-return]


def key_file_of(home: Home) -> Path:
    return Path(unlock_json(home)["key"]["path"])


def pfar_env(
    home: Home,
    *args: str,
    env: dict[str, str] | None = None,
    fds: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`pfar --home HOME ARGS...` as tests.support.pfar runs it, with `env` added and,
    for each NAME: TEXT of `fds`, a pipe holding TEXT whose descriptor NAME names (a
    passphrase on PFAR_PASSPHRASE_FD). Without a controlling terminal: pfar cannot
    prompt."""
    full = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1"}
    full.pop("PFAR_HOME", None)
    full.pop("PFAR_FAULT", None)
    full.update(env or {})
    pipes = []
    try:
        for name, text in (fds or {}).items():
            r, w = os.pipe()
            os.write(w, text.encode())
            os.close(w)
            pipes.append(r)
            full[name] = str(r)
        return subprocess.run(
            [sys.executable, "-m", "pfar", "--home", str(home.root), *args],
            capture_output=True,
            text=True,
            env=full,
            timeout=timeout,
            check=False,
            input=stdin if stdin is not None else "",
            pass_fds=tuple(pipes),
            start_new_session=True,
        )
    finally:
        for fd in pipes:
            os.close(fd)


def killed(proc: subprocess.CompletedProcess[str]) -> bool:
    return proc.returncode == -signal.SIGKILL
