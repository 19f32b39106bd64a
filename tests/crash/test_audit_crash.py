"""The audit log across SIGKILL, with real kernels: a record logged before the kill is in
the file (nothing waits in memory for a flush), and a last line a crash cut off is told
as torn, kept as it is, and bridged by the next start, whose chain goes on."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from pfar.vault.home import Home

from ..integration.test_bad_input import CMD_SCRIPT, CMD_TEMPLATE
from ..support import KernelProcess, make_home, pfar, running_kernel, said

pytestmark = pytest.mark.crash


def sha(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def verify(home: Home, *extra: str) -> tuple[int, dict[str, Any]]:
    r = pfar(home, "audit", "verify", "--json", *extra)
    assert r.returncode in (0, 1), said(r)
    return r.returncode, json.loads(r.stdout)


def cmd_home(root: Any) -> Home:
    return make_home(root / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)


def test_a_record_logged_before_a_sigkill_is_in_the_file(tmp_path: Any) -> None:
    home = cmd_home(tmp_path)
    k = KernelProcess(home)
    try:
        k.wait_ready()
        task_id = k.request("submit", template="cmd", text="sleep 30")["task_id"]
    finally:
        k.kill()  # at once: no flush, no shutdown
    created = [
        r
        for r in map(json.loads, home.audit_log.read_bytes().splitlines())
        if r["event"] == "task_created"
    ]
    assert [r["task_id"] for r in created] == [task_id]
    code, v = verify(home)
    assert code == 0 and v["notes"] == [], v


def test_a_torn_last_line_is_told_apart_and_the_next_start_chains_over_it(
    tmp_path: Any,
) -> None:
    home = cmd_home(tmp_path)
    k = KernelProcess(home)
    try:
        k.wait_ready()
        k.request("submit", template="cmd", text="sleep 30")
    finally:
        k.kill()
    code, before = verify(home)
    assert code == 0, before
    whole = home.audit_log.read_bytes()
    last = whole.splitlines()[-1]
    # what a write cut off by the kill would leave: the start of the next record
    torn = (
        b'{"n": '
        + str(before["head"]["count"] + 1).encode()
        + b', "prev": "'
        + sha(last)[:9].encode()
    )
    with open(home.audit_log, "ab") as fh:
        fh.write(torn)
    torn_line = len(whole.splitlines()) + 1

    r = pfar(home, "audit", "verify")
    assert r.returncode == 0, said(r)  # torn, not tampering
    assert f"line {torn_line}, the last, is not a whole record: a write cut off" in said(r)
    code, v = verify(home)
    assert [(n["kind"], n["line"]) for n in v["notes"]] == [("torn", torn_line)]
    assert v["findings"] == []

    with running_kernel(home) as k2:
        k2.request("submit", template="cmd", text="echo after")
        assert k2.terminate() == 0
    assert "is not a whole audit record" in k2.output()

    stored = home.audit_log.read_bytes()
    assert stored.startswith(whole + torn + b"\n")  # kept as it was, then ended
    after = stored.splitlines()[torn_line:]
    bridge = json.loads(after[0])
    assert bridge["event"] == "audit_torn_tail"
    assert bridge["n"] == before["head"]["count"] + 1
    assert bridge["prev"] == sha(torn) and bridge["after"] == before["head"]["digest"]
    assert (bridge["bytes"], bridge["newline"]) == (len(torn), False)
    assert json.loads(after[1])["prev"] == sha(after[0])  # and the chain goes on

    code, v = verify(home)
    assert code == 0 and v["findings"] == [], v
    [note] = v["notes"]
    assert (note["kind"], note["line"]) == ("torn", torn_line)
    assert "the next start recorded it" in note["message"]
    assert v["head"]["count"] == bridge["n"] + len(after) - 1
    # the head checkpointed before the crash is still reached, with its digest
    checkpoint = before["head"]
    code, v = verify(
        home, "--expect-count", str(checkpoint["count"]), "--expect-digest", checkpoint["digest"]
    )
    assert code == 0, v
