"""Running out of descriptors: accept errors are logged at a bounded rate, and a duty
that fails for lack of descriptors is started again while other failures stay its own."""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket

import pytest

from pfar.kernel import descriptors


def test_accept_errors_are_logged_once_a_minute_not_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def flood() -> None:
        loop = asyncio.get_running_loop()
        descriptors.AcceptErrors(loop).install(loop)
        with socket.socket() as sock:
            for _ in range(10_000):  # what CPython reports for each failed accept()
                loop.call_exception_handler(
                    {
                        "message": "socket.accept() out of system resource",
                        "exception": OSError(errno.EMFILE, "Too many open files"),
                        "socket": sock,
                    }
                )

    with caplog.at_level(logging.DEBUG):
        asyncio.run(flood())
    lines = [r for r in caplog.records if "accept" in r.getMessage()]
    assert len(lines) == 1
    assert "Too many open files" in lines[0].getMessage()


def test_other_loop_errors_still_reach_the_default_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def other() -> None:
        loop = asyncio.get_running_loop()
        descriptors.AcceptErrors(loop).install(loop)
        loop.call_exception_handler({"message": "something else", "exception": ValueError("x")})

    with caplog.at_level(logging.DEBUG):
        asyncio.run(other())
    assert any("something else" in r.getMessage() for r in caplog.records)


def test_a_duty_out_of_descriptors_starts_again_and_other_errors_end_it() -> None:
    starts: list[bool] = []

    async def duty(again: bool) -> None:
        starts.append(again)
        if len(starts) < 3:
            raise OSError(errno.EMFILE, "Too many open files")

    asyncio.run(descriptors.kept("test-duty", duty))
    assert starts == [False, True, True]

    async def broken(again: bool) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):
        asyncio.run(descriptors.kept("test-duty", broken))


def test_a_listener_share_is_a_quarter_of_a_low_limit() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert descriptors.share(10) == max(4, min(10, soft // 4))
    assert descriptors.share(1 << 30) <= max(4, soft // 4)
