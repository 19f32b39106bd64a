from __future__ import annotations

from collections.abc import Iterator

import pytest

from .support import RecordingServer


@pytest.fixture
def http_server() -> Iterator[RecordingServer]:
    server = RecordingServer()
    yield server
    server.close()
