"""The console served with a kernel (`pfar run`): on its own port, by the same ASGI
server as the webhook listener, for the kernel's life. A port it cannot have is said
in the log and the kernel runs on without a console (`pfar console` says why)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

from ..adapters.listener import Listener
from ..config import ConsoleConfig
from ..kernel.api import Operator
from ..vault.home import Home
from .app import Console, build

log = logging.getLogger("pfar.console")


def url_of(config: ConsoleConfig, port: int) -> str:
    host = "127.0.0.1" if config.host in ("0.0.0.0", "") else config.host
    if ":" in host:
        host = f"[{host}]"
    return f"{'https' if config.tls else 'http'}://{host}:{port}/"


async def serve(operator: Operator, config: ConsoleConfig, home: Home) -> None:
    """Serve until cancelled; the address goes to `home.console_address` while it does."""
    if not config.enabled:
        return
    if not config.loopback and not config.tls:
        log.warning(
            "console: serving plain HTTP on %s beyond loopback "
            "(allow_plain_http_beyond_loopback): anyone on that network sees the traffic",
            config.host,
        )
    console = Console(operator, config)
    tls = None
    if config.tls_certificate is not None and config.tls_key is not None:
        tls = (config.tls_certificate, config.tls_key)
    listener = Listener(build(console), config.host, config.port, tls=tls)
    try:
        port = await listener.start()
    except OSError as exc:
        log.error(
            "console: cannot listen on %s:%s (%s); running without it",
            config.host,
            config.port,
            exc,
        )
        return
    address = home.console_address
    _write_private(address, url_of(config, port))
    log.info("console: %s", url_of(config, port))
    try:
        await listener.wait()
    finally:
        with contextlib.suppress(FileNotFoundError):
            address.unlink()
        await asyncio.shield(listener.stop())


def _write_private(path: os.PathLike[str], text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text + "\n")
