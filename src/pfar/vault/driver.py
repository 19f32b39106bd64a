"""The SQLite driver: SQLCipher's build of SQLite, through `sqlcipher3`.

sqlcipher3 is the standard library's `sqlite3` module (the same DB-API, errors, result
codes and backup API) compiled against SQLCipher, which encrypts every page of a
database and of its WAL when the connection is given a key, and reads and writes plain
SQLite files when it is not. Every vault connection goes through it, so a plain vault
and an encrypted one are the same code; its exceptions are its own classes (not
`sqlite3`'s), so nothing in pfar may mix the two modules.

The type checker reads it as `sqlite3`: sqlcipher3 ships no stubs, and its interface is
that module's, release for release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3 as sqlite
else:
    from sqlcipher3 import dbapi2 as sqlite

__all__ = ["sqlite"]
