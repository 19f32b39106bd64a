"""The fail-stop notice: what it says, and that a channel that fails does not keep it
from the others; the control socket closes with its connections ended."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path
from typing import Any

from pfar.journal import OwnerMessage
from pfar.journal.message_keys import FailStopKey
from pfar.kernel import fail_stop
from pfar.kernel.control import ControlServer
from pfar.vault.driver import sqlite
from pfar.vault.home import Home


class _Sink:
    def __init__(self, name: str, fails: bool = False) -> None:
        self.name = name
        self.fails = fails
        self.got: list[OwnerMessage] = []

    async def deliver(self, message: OwnerMessage) -> None:
        if self.fails:
            raise OSError(5, "Input/output error")
        self.got.append(message)


def test_a_bare_database_error_is_said_with_the_journal_named(tmp_path: Path) -> None:
    journal = tmp_path / "vault" / "sessions.db"
    error = sqlite.OperationalError("database or disk is full")
    error.sqlite_errorcode = sqlite.SQLITE_FULL  # type: ignore[misc]
    why = fail_stop.cause(error, journal)
    assert why.startswith(f"pfar cannot write {journal} (database or disk is full)")
    assert f"the disk holding {journal.parent} is full" in why
    assert fail_stop.cause(RuntimeError("boom"), journal) == f"{journal}: RuntimeError: boom"


def test_every_sink_that_works_is_told_once_whatever_the_others_do(tmp_path: Path) -> None:
    message = fail_stop.notice("boot-1", f"pfar cannot write {tmp_path}/x (disk I/O error).")
    assert message.message_key == FailStopKey("boot-1")
    assert message.message_key.text == "fail-stop:boot-1"
    assert message.body.startswith("pfar has stopped (fail-stop): pfar cannot write")
    sinks = [_Sink("owner.log", fails=True), _Sink("telegram"), _Sink("slack")]
    told = asyncio.run(fail_stop.tell_owner(message, sinks))
    assert told == ["telegram", "slack"]
    assert [len(s.got) for s in sinks] == [0, 1, 1]


def test_the_control_socket_closes_with_its_connections_handlers_ended(tmp_path: Path) -> None:
    """A fail-stop goes from closing the socket straight to exit: a connection's handler
    still running then would be cancelled, and asyncio would print a traceback for it."""
    home = Home(tmp_path)
    home.root.mkdir(exist_ok=True)
    kernel: Any = types.SimpleNamespace(
        home=home, journal=None, audit=types.SimpleNamespace(log=lambda *a, **kw: None)
    )

    async def go() -> list[asyncio.Task[Any]]:
        server = ControlServer(kernel)
        await server.start()
        _, writer = await asyncio.open_unix_connection(str(home.control_socket))
        await asyncio.sleep(0.1)  # its handler waits for a request
        await server.close()
        writer.close()
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(go()) == []
