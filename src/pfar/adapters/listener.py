"""An HTTP listener a channel runs (Starlette on uvicorn): webhooks and WhatsApp.

`pfar run` starts a channel's listener before recovery (`start` is idempotent), and
the channel's own run takes it over; until then its routes answer 503, so a sender's
own retries deliver what arrived during a restart. uvicorn's signal handlers are left
out: SIGTERM is the kernel's to handle (a graceful shutdown), not a listener's.

A flood cannot use up the kernel's descriptors: at most `max_connections` are open at
once (fewer when the descriptor limit is low: kernel/descriptors.py), and a request
must have arrived whole within `request_timeout` seconds (slow senders are cut off).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

import uvicorn
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..kernel import descriptors

log = logging.getLogger("pfar.adapters.listener")


class TooLarge(Exception):
    pass


class Gone(Exception):
    """The sender hung up (or was cut off, too slow) before its body was read."""


# the answer to a connection over the cap: a sender retries it later
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 5\r\n"
    b"connection: close\r\n\r\n"
)


def _guarded(most: int, seconds: float) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with two limits against a flood (slowloris):
    connections over `most` are answered 503 and closed at once, and a request whose
    headers and body have not all arrived `seconds` after the connection opened (or
    after the previous answer) is cut off."""
    lines = descriptors.Every()

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _armed_for: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > most:
                if lines.due():
                    log.warning("listener: %d connections open; refusing more", most)
                transport.write(_BUSY)
                transport.close()
                return
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request on this connection has its own time

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._armed_for = self.cycle
            self._deadline = asyncio.get_running_loop().call_later(seconds, self._late)

        def _late(self) -> None:
            cycle = self.cycle
            if cycle is None or cycle is self._armed_for or cycle.more_body:
                self.transport.abort()  # still waiting for its headers or body

    return Guarded


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve(server: _Server, host: str, port: int) -> None:
    """uvicorn's serve, with its exit on a port it cannot bind told as an OSError: a
    SystemExit out of a task would stop the kernel's whole event loop."""
    try:
        await server.serve()
    except SystemExit:
        raise OSError(f"cannot listen on {host}:{port} (in use, or not this machine's)") from None


class Listener:
    def __init__(
        self,
        app: ASGIApp,
        host: str,
        port: int,
        *,
        max_connections: int = 256,
        request_timeout: float = 10.0,
        tls: tuple[str, str] | None = None,  # (certificate file, key file)
    ) -> None:
        self._app = app
        self._tls = tls
        self._host = host
        self._port = port
        self._protocol = _guarded(descriptors.share(max_connections), request_timeout)
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
                    http=self._protocol,
                    backlog=descriptors.ACCEPT_BURST,
                    ssl_certfile=self._tls[0] if self._tls else None,
                    ssl_keyfile=self._tls[1] if self._tls else None,
                )
            )
            serving = asyncio.create_task(_serve(server, self._host, self._port))
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
    try:
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise TooLarge()
    except ClientDisconnect:
        raise Gone() from None
    return bytes(body)
