"""owner.log: a line a failed write cut short does not swallow the next message, and a
file that cannot be written is named in pfar's error (the kernel stops on it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pfar.errors import VaultUnwritable
from pfar.journal import OwnerMessage
from pfar.journal.message_keys import MessageKind, ResultKey
from pfar.kernel.owner import OwnerLogSink


def test_a_line_cut_short_is_ended_before_the_next_message(tmp_path: Path) -> None:
    path = tmp_path / "owner.log"
    path.write_text('{"at": "2024-01-01T00:00:00", "key": "a", "bo')  # the disk filled up
    sink = OwnerLogSink(path)
    asyncio.run(sink.deliver(OwnerMessage(ResultKey("b"), MessageKind.notice, "after the cut")))
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["key"] == "result:b"
    assert OwnerLogSink(path).has("result:b")  # a restart knows it was written


def test_an_owner_log_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    path = tmp_path / "owner.log"
    sink = OwnerLogSink(path)
    path.mkdir()  # after the start, something else took its place
    with pytest.raises(VaultUnwritable) as caught:
        asyncio.run(sink.deliver(OwnerMessage(ResultKey("c"), MessageKind.notice, "hello")))
    assert f"pfar cannot write {path} (Is a directory)" in str(caught.value)
