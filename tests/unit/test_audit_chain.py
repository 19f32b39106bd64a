"""Properties of the audit log's chain on real files: a log as AuditLog wrote it verifies;
any one record edited, removed, moved or inserted (anywhere but the very end) does not;
a tail cut off fails against the head checkpointed before; and whatever is done to the
file, against that checkpoint it verifies only when it is the file that was written."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pfar.kernel.audit import AuditLog
from pfar.kernel.audit_chain import AuditHead
from pfar.kernel.audit_verify import verify
from pfar.policy.redact import Redactor


def written(count: int) -> tuple[list[bytes], AuditHead]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "audit.log"
        audit = AuditLog(path, Redactor())
        for i in range(count):
            audit.log("task_created", task_id=f"task-{i}")
        head = audit.head()
        audit.close()
        return path.read_bytes().splitlines(keepends=True), head


LOG, HEAD = written(12)


def verdict_of(lines: list[bytes], checkpoint: AuditHead | None = None) -> tuple[bool, list[str]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "audit.log"
        path.write_bytes(b"".join(lines))
        v = verify(path, checkpoint)
        return v.intact, [f.kind for f in v.findings]


def test_the_log_as_written_is_intact_and_reaches_its_head() -> None:
    assert verdict_of(LOG, HEAD) == (True, [])
    assert HEAD.count == len(LOG)


def _edit(line: bytes) -> bytes:
    record = json.loads(line)
    record["task_id"] += "x"
    return json.dumps(record).encode() + b"\n"


@st.composite
def one_tampering(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    lines = list(LOG)
    last = len(lines) - 1
    how = draw(st.sampled_from(["edit", "delete", "swap", "copy", "junk"]))
    if how == "edit":
        i = draw(st.integers(0, last - 1))  # the last record edited: only a checkpoint sees
        lines[i] = _edit(lines[i])
    elif how == "delete":
        del lines[draw(st.integers(0, last - 1))]
    elif how == "swap":
        i = draw(st.integers(0, last - 1))
        j = draw(st.integers(i + 1, last))
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "copy":
        lines.insert(draw(st.integers(0, last + 1)), lines[draw(st.integers(0, last))])
    else:
        junk = draw(st.sampled_from([b"garbage\n", b"{}\n", b'{"event": "x"}\n', b"\n"]))
        lines.insert(draw(st.integers(0, last)), junk)
    return how, lines


@settings(max_examples=150, deadline=None)
@given(one_tampering())
def test_any_one_record_tampered_with_is_found(case: tuple[str, list[bytes]]) -> None:
    how, lines = case
    intact, kinds = verdict_of(lines)
    assert not intact, how
    assert kinds


@settings(max_examples=50, deadline=None)
@given(st.integers(1, len(LOG)))
def test_a_tail_cut_off_is_found_against_the_head(cut: int) -> None:
    assert verdict_of(LOG[:-cut])[0]  # alone, the file cannot tell
    assert verdict_of(LOG[:-cut], HEAD) == (False, ["truncated"])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["drop", "dup", "move", "cut", "edit"]), st.integers(0, 200)),
        max_size=6,
    )
)
def test_against_its_head_only_the_log_as_written_verifies(ops: list[tuple[str, int]]) -> None:
    lines = list(LOG)
    for op, k in ops:
        if not lines:
            break
        i = k % len(lines)
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(k % (len(lines) + 1), lines[i])
        elif op == "move":
            lines.insert(k % len(lines), lines.pop(i))
        elif op == "cut":
            lines[i] = lines[i][: k % max(1, len(lines[i]))]
        else:  # one character of its text changed
            lines[i] = lines[i].replace(b"task-", b"task_", 1) if b"task-" in lines[i] else b"x"
    intact, _ = verdict_of(lines, HEAD)
    # a last line that is not a whole one is a write a crash cut off: noted, not a break
    text = b"".join(lines)
    whole = text if text.endswith(b"\n") or not text else text[: text.rfind(b"\n") + 1]
    assert intact == (whole == b"".join(LOG))
