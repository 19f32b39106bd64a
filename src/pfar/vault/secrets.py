"""`secrets.db`: credentials by name. Values never leave this module except to a tool call."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import PfarError
from .driver import sqlite
from .keys import VaultKey
from .sqlite import Synchronous, open_vault_db

# Redaction finds a secret by its value in every text pfar keeps or shows; a value this
# short is found in ordinary words and numbers, so it could be neither redacted nor kept
MIN_SECRET_LENGTH = 8
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")  # what a {{secret:NAME}} reference can name
# A key, a token, a PEM file fit many times over; the redactor looks for every secret in
# every line it cleans, so a value the size of a file would cost every log line.
MAX_SECRET = 64 << 10


def checked_secret(name: str, value: str) -> str:
    """The value to store under `name` as the owner gave it, or a clear refusal."""
    if not _NAME.fullmatch(name):
        raise PfarError(f"{name!r} is not a secret name (letters, digits, _ . -)")
    value = value.strip()
    if not value:
        raise PfarError("the secret is empty; nothing was stored")
    if len(value) < MIN_SECRET_LENGTH:
        raise PfarError(
            f"secret {name!r} is {len(value)} characters long; pfar needs at least "
            f"{MIN_SECRET_LENGTH} to find and redact it wherever it appears, so nothing "
            "was stored"
        )
    check_secret_size(value)
    return value


def check_secret_size(value: str) -> None:
    size = len(value.encode(errors="surrogatepass"))
    if size > MAX_SECRET:
        raise PfarError(
            f"the secret is {size} bytes; at most {MAX_SECRET} ({MAX_SECRET >> 10} KiB) "
            "are stored; nothing was stored"
        )


@dataclass(frozen=True, slots=True)
class SecretEntry:
    """A secret as `pfar secret list` shows it: what it is, never what it holds."""

    name: str
    service: str | None
    created_at: str
    updated_at: str  # when its value was last set

    def to_json(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "service": self.service,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


class SecretStore:
    def __init__(self, conn: sqlite.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        key: VaultKey | None = None,
        create: bool = False,
        synchronous: Synchronous = "FULL",
        readonly: bool = False,
    ) -> SecretStore:
        return cls(
            open_vault_db(
                path, "secrets", key=key, create=create, synchronous=synchronous, readonly=readonly
            )
        )

    def set(self, name: str, value: str, service: str | None = None) -> None:
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(
                    "INSERT INTO secrets(name, value, service, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                    "value = excluded.value, updated_at = excluded.updated_at",
                    (name, value, service, at, at),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def get(self, name: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM secrets WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    def values(self) -> dict[str, str]:
        """Every secret, for the redactor. Never log the result."""
        with self._lock:
            rows = self._conn.execute("SELECT name, value FROM secrets").fetchall()
        return {str(n): str(v) for n, v in rows}

    def listing(self) -> list[SecretEntry]:
        """Every secret's name, service and times, by name; never a value."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT name, service, created_at, updated_at FROM secrets ORDER BY name"
            ).fetchall()
        return [
            SecretEntry(str(n), None if s is None else str(s), str(c), str(u))
            for n, s, c, u in rows
        ]

    def remove(self, name: str) -> bool:
        """Drop secret `name`; whether there was one."""
        with self._lock:
            gone = self._conn.execute("DELETE FROM secrets WHERE name = ?", (name,))
        return gone.rowcount > 0

    def names(self) -> list[str]:
        with self._lock:
            return [str(r[0]) for r in self._conn.execute("SELECT name FROM secrets ORDER BY name")]

    def close(self) -> None:
        self._conn.close()
