"""An HTTP listener a channel runs (Starlette on uvicorn): webhooks and WhatsApp.

`pfar run` starts a channel's listener before recovery (`start` is idempotent), and
the channel's own run takes it over; until then its routes answer 503, so a sender's
own retries deliver what arrived during a restart. uvicorn's signal handlers are left
out: SIGTERM is the kernel's to handle (a graceful shutdown), not a listener's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.requests import Request
from starlette.types import ASGIApp


class TooLarge(Exception):
    pass


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Listener:
    def __init__(self, app: ASGIApp, host: str, port: int) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._server: _Server | None = None
        self._serving: asyncio.Task[None] | None = None

    @property
    def port(self) -> int | None:
        """The port listened on, once listening (a configured port 0 picks a free one)."""
        if self._server is None or not self._server.started:
            return None
        return int(self._server.servers[0].sockets[0].getsockname()[1])

    async def start(self) -> int:
        """Listen (if not listening yet); the port. OSError when it cannot."""
        if self._server is None or self._serving is None or self._serving.done():
            server = _Server(
                uvicorn.Config(
                    self._app,
                    host=self._host,
                    port=self._port,
                    log_level="warning",
                    lifespan="off",
                    access_log=False,
                )
            )
            serving = asyncio.create_task(server.serve())
            while not server.started:
                if serving.done():
                    serving.result()
                    raise OSError(
                        f"the listener on {self._host}:{self._port} stopped before it started"
                    )
                await asyncio.sleep(0.02)
            self._server, self._serving = server, serving
        return int(self.port or 0)

    async def wait(self) -> None:
        """Until the listener stops (it stops only when told to, or fails)."""
        assert self._serving is not None, "start() first"
        await asyncio.shield(self._serving)

    async def stop(self) -> None:
        server, serving = self._server, self._serving
        self._server = self._serving = None
        if server is not None and serving is not None:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(serving, 5)


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused (TooLarge) as soon as it passes `limit` bytes: a
    declared length over it is refused unread."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise TooLarge()
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise TooLarge()
    return bytes(body)
