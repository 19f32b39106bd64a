"""Opening the journal on a PostgreSQL server."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool

from ...errors import StoreUnavailable, VaultError
from ..faults import FaultHook
from ..journal import Journal
from ..sessions import SessionManager
from .backing import PostgresBacking
from .schema import migrate
from .writer import PostgresWriter

# reading connections: a kernel's reads are short, and most wait on no one
POOL_SIZE = 4


def describe(dsn: str) -> str:
    """The server as a message names it: never the password."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "a PostgreSQL server (its DSN could not be read)"
    user = f"{info['user']}@" if info.get("user") else ""
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info.get('dbname') or ''}"


async def _configure(conn: AsyncConnection[Any]) -> None:
    # JSON comes back as the text SQLite gives: the families' readers decode it once,
    # the same way on both backends
    conn.adapters.register_loader("jsonb", TextLoader)
    conn.adapters.register_loader("json", TextLoader)


async def connect(dsn: str, where: str, password: str | None = None) -> AsyncConnection[Any]:
    """A connection (autocommit) to the server; the password, when given, goes to libpq
    as a keyword, never into the DSN a message could show."""
    try:
        conn = await AsyncConnection.connect(dsn, autocommit=True, **_options(dsn, password))
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot connect to {where}: {_first_line(exc)}") from None
    await _configure(conn)
    return conn


async def open_journal(
    dsn: str,
    *,
    create: bool = False,
    readonly: bool = False,
    fault_hook: FaultHook | None = None,
    password: str | None = None,
) -> Journal:
    """A kernel's journal on the server `dsn` names (migrated to this pfar's schema), or,
    `readonly`, one to look at (nothing is migrated or written through it)."""
    where = describe(dsn)
    wconn = await connect(dsn, where, password)
    try:
        if not readonly:
            await migrate(wconn, where, create=create)
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={"autocommit": True, **_options(dsn, password)},
            configure=_configure,
            open=False,
            name="pfar-journal",
        )
        await pool.open(wait=True, timeout=30)
    except (VaultError, psycopg.Error, TimeoutError) as exc:
        await wconn.close()
        if isinstance(exc, VaultError):
            raise
        raise StoreUnavailable(f"cannot open the journal on {where}: {exc}") from None
    writer = None if readonly else PostgresWriter(wconn, where, fault_hook=fault_hook)
    db = PostgresBacking(where, pool, writer)

    async def close(checkpoint: bool) -> None:
        if writer is not None:
            await writer.close()
        await pool.close()
        await wconn.close()

    return Journal(db, sessions=lambda: SessionManager(db), on_close=close)


# a server that stops answering (a network cut) is given up on within these, and the
# kernel stops (fail-stop) instead of waiting minutes for TCP; a DSN's own values win
_TIMEOUTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}


def _options(dsn: str, password: str | None) -> dict[str, Any]:
    """What libpq gets beside the DSN: the password (never in the DSN), and timeouts."""
    given = conninfo_to_dict(dsn)
    extra: dict[str, Any] = {k: v for k, v in _TIMEOUTS.items() if k not in given}
    if password is not None:
        extra["password"] = password
    return extra


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
