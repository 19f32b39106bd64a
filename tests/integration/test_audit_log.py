"""The audit log's chain, through the real CLI on real files: a kernel's log verifies; a
record edited, removed, moved or inserted is named by `pfar audit verify`; a tail cut off
is found against a checkpoint; `pfar audit show` reads the log; a secret is redacted
before its record is hashed and written."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pfar.kernel.audit import AuditLog
from pfar.policy.redact import Redactor

from ..support import make_home, pfar, running_kernel, said
from .test_bad_input import CMD_SCRIPT, CMD_TEMPLATE

GENESIS = "0" * 64


def sha(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


@pytest.fixture(scope="module")
def kernel_log(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The lines (newlines kept) of the audit log a real kernel wrote: a start, three
    tasks, a clean stop."""
    home = make_home(
        tmp_path_factory.mktemp("audit") / "home",
        templates={"cmd": CMD_TEMPLATE},
        script=CMD_SCRIPT,
    )
    with running_kernel(home) as k:
        for n in range(3):
            r = pfar(home, "submit", "cmd", f"echo {n}", "--wait", "--json")
            assert r.returncode == 0, said(r)
        assert k.terminate() == 0
    return home.audit_log.read_bytes().splitlines(keepends=True)


def a_log(root: Path, lines: list[bytes]) -> Path:
    """`lines` as the audit log of a home at `root` (verify reads that file alone)."""
    root.mkdir(exist_ok=True)
    (root / "audit.log").write_bytes(b"".join(lines))
    return root


def verify(root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    r = pfar(root, "audit", "verify", "--json", *extra)
    assert r.returncode in (0, 1), said(r)
    return r.returncode, json.loads(r.stdout)


def records(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def index_of(lines: list[bytes], event: str, nth: int = 0) -> int:
    """The 0-based index of the `nth` line with `event`."""
    return [i for i, r in enumerate(records(lines)) if r["event"] == event][nth]


def test_a_real_kernels_log_chains_record_by_record_and_verifies(
    kernel_log: list[bytes], tmp_path: Path
) -> None:
    lines = kernel_log
    prev = GENESIS
    for number, line in enumerate(lines, 1):
        assert line.endswith(b"\n")
        record = json.loads(line)
        assert (record["n"], record["prev"]) == (number, prev), line
        prev = sha(line[:-1])
    events = [r["event"] for r in records(lines)]
    assert events[0] == "system_startup" and events[-1] == "system_shutdown"
    assert events.count("task_created") == 3

    root = a_log(tmp_path / "home", lines)
    r = pfar(root, "audit", "verify")
    assert r.returncode == 0, said(r)
    assert f"intact: {len(lines)} record(s)" in r.stdout
    code, v = verify(root)
    assert code == 0 and v["intact"] and v["findings"] == [] and v["notes"] == []
    assert v["head"] == {"count": len(lines), "digest": prev}
    # the head, kept as a checkpoint, is reached
    code, v = verify(root, "--expect-count", str(len(lines)), "--expect-digest", prev)
    assert code == 0, v


def test_an_edited_field_names_the_record(kernel_log: list[bytes], tmp_path: Path) -> None:
    lines = list(kernel_log)
    i = index_of(lines, "task_created", 1)
    record = json.loads(lines[i])
    edited = record["task_id"][:-4] + "beef"
    lines[i] = lines[i].replace(record["task_id"].encode(), edited.encode())
    assert json.loads(lines[i])["task_id"] == edited  # still a well-formed record
    root = a_log(tmp_path / "home", lines)

    r = pfar(root, "audit", "verify")
    assert r.returncode == 1, said(r)
    n = i + 1
    assert "NOT intact" in r.stdout
    assert f"does not chain to record {n} (line {n}, task_created): record {n} was edited" in (
        said(r)
    )
    code, v = verify(root)
    assert code == 1
    [finding] = v["findings"]
    assert (finding["kind"], finding["line"], finding["n"], finding["event"]) == (
        "edited",
        n,
        n,
        "task_created",
    )


def test_an_edited_prev_names_that_record(kernel_log: list[bytes], tmp_path: Path) -> None:
    lines = list(kernel_log)
    i = index_of(lines, "task_created", 0)
    record = json.loads(lines[i])
    lines[i] = lines[i].replace(record["prev"].encode(), b"1" * 64)
    code, v = verify(a_log(tmp_path / "home", lines))
    assert code == 1
    [finding] = v["findings"]
    assert (finding["kind"], finding["n"], finding["line"]) == ("edited", i + 1, i + 1)
    assert f"record {i + 2} (line {i + 2}) does not chain to it" in finding["message"]


def test_a_deleted_line_is_named_as_removed(kernel_log: list[bytes], tmp_path: Path) -> None:
    lines = list(kernel_log)
    i = index_of(lines, "task_created", 1)
    del lines[i]
    root = a_log(tmp_path / "home", lines)
    r = pfar(root, "audit", "verify")
    assert r.returncode == 1, said(r)
    assert f"record {i + 1} is missing between record {i} (line {i}," in said(r)
    code, v = verify(root)
    assert code == 1
    [finding] = v["findings"]
    assert (finding["kind"], finding["n"], finding["line"]) == ("removed", i + 1, i + 1)


def test_two_swapped_lines_are_named_as_reordered(kernel_log: list[bytes], tmp_path: Path) -> None:
    lines = list(kernel_log)
    i = index_of(lines, "task_created", 1)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    root = a_log(tmp_path / "home", lines)
    r = pfar(root, "audit", "verify")
    assert r.returncode == 1, said(r)
    code, v = verify(root)
    assert code == 1
    [finding] = v["findings"]
    # record i+1 now stands on line i+2, after record i+2
    assert (finding["kind"], finding["n"], finding["line"], finding["event"]) == (
        "reordered",
        i + 1,
        i + 2,
        "task_created",
    )
    assert f"record {i + 1} (line {i + 2}, task_created) is out of order" in said(r)


def test_a_copied_record_and_a_foreign_line_are_named_as_inserted(
    kernel_log: list[bytes], tmp_path: Path
) -> None:
    lines = list(kernel_log)
    i = index_of(lines, "task_created", 0)
    lines.insert(i + 3, lines[i])  # a record replayed further on
    lines.insert(2, b'{"at": "2025-01-01T00:00:00+00:00", "event": "secret_removed"}\n')
    code, v = verify(a_log(tmp_path / "home", lines))
    assert code == 1
    kinds = [(f["kind"], f["line"], f["n"]) for f in v["findings"]]
    assert kinds == [("inserted", 3, None), ("inserted", i + 5, i + 1)], v["findings"]


def test_a_tail_cut_off_is_found_against_a_checkpoint_only(
    kernel_log: list[bytes], tmp_path: Path
) -> None:
    lines = list(kernel_log)
    count, digest = len(lines), sha(lines[-1][:-1])
    checkpoint = ("--expect-count", str(count), "--expect-digest", digest)

    cut = a_log(tmp_path / "cut", lines[:-2])
    code, v = verify(cut)
    assert code == 0  # nothing inside the file tells: what the checkpoint is for
    r = pfar(cut, "audit", "verify", *checkpoint)
    assert r.returncode == 1, said(r)
    assert (
        f"the log ends at record {count - 2} (line {count - 2}), but the checkpoint names "
        f"record {count}: records {count - 1}–{count} were cut from its end"
    ) in said(r)
    code, v = verify(cut, *checkpoint)
    assert [f["kind"] for f in v["findings"]] == ["truncated"]

    # the last record edited: its digest is not the one checkpointed
    last = lines[-1].replace(b"system_shutdown", b"system_shutdowN")
    edited = a_log(tmp_path / "edited", [*lines[:-1], last])
    assert verify(edited)[0] == 0
    code, v = verify(edited, *checkpoint)
    [finding] = v["findings"]
    assert (finding["kind"], finding["n"], finding["line"]) == ("edited", count, count)
    assert "is not the record the checkpoint names" in finding["message"]

    # a checkpoint further back than the head is reached by a log that went on
    code, v = verify(cut, "--expect-count", str(count - 2), "--expect-digest", sha(lines[-3][:-1]))
    assert code == 0, v


def test_a_checkpoint_digest_needs_its_count_and_64_hex_digits(tmp_path: Path) -> None:
    root = a_log(tmp_path / "home", [])
    r = pfar(root, "audit", "verify", "--expect-digest", "ab" * 32)
    assert r.returncode == 2 and "--expect-count" in said(r), said(r)
    r = pfar(root, "audit", "verify", "--expect-count", "3", "--expect-digest", "abc")
    assert r.returncode == 2 and "64 hex digits" in said(r), said(r)


def test_a_missing_log_is_said_and_fails_only_against_a_checkpoint(tmp_path: Path) -> None:
    r = pfar(tmp_path, "audit", "verify")
    assert r.returncode == 0 and "does not exist" in said(r), said(r)
    r = pfar(tmp_path, "audit", "verify", "--expect-count", "5")
    assert r.returncode == 1 and "the log was removed" in said(r), said(r)
    r = pfar(tmp_path, "audit", "show")
    assert r.returncode == 0 and "no audit log yet" in said(r), said(r)


def test_show_reads_the_log_for_people_and_for_scripts(
    kernel_log: list[bytes], tmp_path: Path
) -> None:
    root = a_log(tmp_path / "home", kernel_log)
    r = pfar(root, "audit", "show", "--last", "5")
    assert r.returncode == 0, said(r)
    assert "system_shutdown" in r.stdout and "system_startup" not in r.stdout

    r = pfar(root, "audit", "show", "--event", "task_created", "--json")
    assert r.returncode == 0, said(r)
    shown = r.stdout.splitlines()
    assert [s.encode() + b"\n" for s in shown] == [
        line for line in kernel_log if json.loads(line)["event"] == "task_created"
    ]  # the lines as stored, byte for byte
    task_id = json.loads(shown[1])["task_id"]

    r = pfar(root, "audit", "show", "--task", task_id[:8], "--json", "--last", "0")
    assert r.returncode == 0, said(r)
    mine = [json.loads(s) for s in r.stdout.splitlines()]
    assert mine and {m["task_id"] for m in mine} == {task_id}
    assert "task_created" in {m["event"] for m in mine}

    r = pfar(root, "audit", "show", "--event", "no_such_event")
    assert r.returncode == 0 and "no audit records match" in said(r), said(r)


def test_a_secret_is_redacted_before_its_record_is_hashed(tmp_path: Path) -> None:
    secret = "hunter2-correct-horse-battery"
    path = tmp_path / "audit.log"
    audit = AuditLog(path, Redactor(lambda: {"mail_password": secret}))
    audit.log("credential_received", detail=f"the key is {secret}", token=secret)
    audit.log("task_created", task_id="t1")
    head = audit.head()
    audit.close()

    stored = path.read_bytes()
    assert secret.encode() not in stored
    first, second = stored.splitlines()
    assert json.loads(first)["detail"] == "the key is [REDACTED:mail_password]"
    assert json.loads(first)["token"] == "[REDACTED]"
    # the chain is over the bytes stored: redacted before hashing
    assert json.loads(second)["prev"] == sha(first)
    assert (head.count, head.digest) == (2, sha(second))
    code, v = verify(tmp_path)
    assert code == 0 and v["head"] == {"count": 2, "digest": head.digest}


def test_fields_named_like_the_records_own_cannot_take_their_place(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.log", Redactor())
    audit.log("odd", n=7, prev="x", at="start")
    audit.close()
    record = json.loads((tmp_path / "audit.log").read_bytes())
    assert (record["n"], record["prev"]) == (1, GENESIS)
    assert record["at"].startswith("20")  # the time it was logged
    assert (record["n_field"], record["prev_field"], record["at_field"]) == (7, "x", "start")
    assert verify(tmp_path)[0] == 0


def test_lines_from_before_the_chain_are_bridged_not_rewritten(tmp_path: Path) -> None:
    old = b'{"at": "2025-01-01T00:00:00+00:00", "event": "system_startup"}\n' * 3
    path = tmp_path / "audit.log"
    path.write_bytes(old)
    audit = AuditLog(path, Redactor())
    audit.log("system_startup")
    audit.close()

    stored = path.read_bytes()
    assert stored.startswith(old)
    bridge = json.loads(stored.splitlines()[3])
    assert bridge["event"] == "audit_chain_started"
    assert (bridge["n"], bridge["prev"], bridge["after"]) == (
        1,
        sha(old.splitlines()[-1]),
        GENESIS,
    )
    code, v = verify(tmp_path)
    assert code == 0, v
    assert [(n["kind"], n["line"]) for n in v["notes"]] == [("unchained", 1)]
    assert v["head"]["count"] == 2


# a process whose files may not grow past their size after the first record, until it
# raises its own soft limit: the audit log fails as on a full disk, then has room again
FULL_THEN_ROOM = """
import resource, signal, sys
from pathlib import Path
from pfar.kernel.audit import AuditLog
from pfar.policy.redact import Redactor

path, count = Path(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
audit = AuditLog(path, Redactor())
audit.log("system_startup")
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size, resource.RLIM_INFINITY))
for i in range(count):
    audit.log("task_created", task_id=f"task-{i}")
print("head while full:", audit.head().count, flush=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
audit.flush()
print("head after:", audit.head().count, audit.synced_head().count, flush=True)
audit.close()
"""


def test_records_that_wait_for_room_keep_the_chain_whole_and_the_dropped_are_counted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    kept = 100_000  # what the audit log holds in memory at most
    r = subprocess.run(
        [sys.executable, "-c", FULL_THEN_ROOM, str(path), str(kept + 7)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.count(f"{path}: cannot be written (File too large)") == 1, r.stderr
    assert "written again" in r.stderr
    assert "head while full: 1\n" in r.stdout
    # the first one was numbered as its write failed, and waited to be written again;
    # of the next ones, the oldest six fell out: a record says so, then the kept follow
    assert f"head after: {kept + 3} {kept + 3}\n" in r.stdout
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[1])["task_id"] == "task-0"
    lost = json.loads(lines[2])
    assert (lost["event"], lost["count"]) == ("audit_records_lost", 6)
    assert json.loads(lines[3])["task_id"] == "task-7"
    assert json.loads(lines[-1])["task_id"] == f"task-{kept + 6}"
    assert "6 audit record(s) could not be written and are lost" in r.stderr
    code, v = verify(tmp_path)
    assert code == 0 and v["records"] == kept + 3, v
