"""A task in flight during kernel death after kernel death is never abandoned on that count.

Recovery knows the task was in flight each time and made no progress in between; it does
not know why the kernel died. So it parks the task on a question (resume or abandon):
killed from outside, the task is resumed at the owner's word; a task that kills the
kernel each time runs nothing until the owner answers. Every test of an answer kills
the kernel before the answer (the question is re-sent) and after it (the resumed run):
N deaths after a "resume", the owner is asked again, never answered by the old "resume".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from pfar.journal import payloads
from pfar.journal.owner_records import ApprovalRecord
from pfar.journal.records import TaskRecord
from pfar.vault.home import Home

from ..support import (
    KernelProcess,
    last_boot,
    make_home,
    owner_messages,
    pfar,
    task_approvals,
    task_of_event,
    task_record,
    wait_for,
)

# every test here runs on each journal backend
pytestmark = [pytest.mark.crash, pytest.mark.both_backends]

MAX = 2  # kernel deaths in a row with a task in flight before its owner is asked
CONFIG = f"[recovery]\nmax_recovery_attempts = {MAX}\n"
TERMINAL = ("Completed", "Failed", "Abandoned")


def _wait_state(home: Home, task_id: str, state: str) -> TaskRecord:
    def reached() -> TaskRecord | None:
        row = task_record(home, task_id)
        if row.state != state and row.state in TERMINAL:
            raise AssertionError(f"task ended {row.state}, not {state}: {row.error}")
        return row if row.state == state else None

    return wait_for(reached, what=f"the task to reach {state}")  # type: ignore[no-any-return]


def _report(home: Home, k: KernelProcess) -> str:
    key = f"report:{k.request('ping')['boot_id']}"
    (body,) = wait_for(
        lambda: [m["body"] for m in owner_messages(home) if m["key"] == key],
        what=f"the report {key}",
    )
    return str(body)


def _question(home: Home, approval_id: str, *, resent: bool) -> str:
    """The question's message as the owner got it (the first, or a re-send)."""
    key = f"approval:{approval_id}:{1 if resent else 0}"
    (body,) = wait_for(
        lambda: [m["body"] for m in owner_messages(home) if m["key"] == key],
        what=f"the question {key}",
    )
    return str(body)


def _pending(home: Home, task_id: str) -> ApprovalRecord:
    (pending,) = [a for a in task_approvals(home, task_id) if a.status == "pending"]
    return pending


def _parked_line(title: str) -> str:
    return (
        f" - 1 task parked: in flight during {MAX} kernel deaths in a row with no progress; "
        f"the owner is asked to resume or abandon ({title})"
    )


@contextlib.contextmanager
def _kernels(home: Home) -> Iterator[list[KernelProcess]]:
    """The kernels a test starts, each SIGKILLed by pid at the end if still running."""
    started: list[KernelProcess] = []
    try:
        yield started
    finally:
        for k in started:
            if k.proc.poll() is None:
                k.kill()


def _start(home: Home, started: list[KernelProcess], *, ready: bool = True) -> KernelProcess:
    k = KernelProcess(home)
    started.append(k)
    if ready:
        k.wait_ready()
    return k


def _submit(k: KernelProcess, template: str) -> str:
    """Submit; when the kernel dies under the call, find the task by its event id."""
    event_id = str(uuid.uuid4())
    try:
        return str(k.request("submit", template=template, text="go", event_id=event_id)["task_id"])
    except Exception:
        found = wait_for(lambda: task_of_event(k.home, event_id), what="the submitted task")
        return str(found)


# -- killed from outside while the task happens to be in flight -------------------------

SLOW = 'id = "slow"\ndescription = "Slow plan"\nallowed_tools = ["file.write"]\n'


def _slow_script(delay: float) -> str:
    return f"""
[[responses]]
template = "slow"
phase = "plan"
delay_seconds = {delay}
json = {{ steps = [ {{ tool = "file.write", args = {{ path = "n.txt", content = "done" }} }} ] }}

[[responses]]
phase = "synthesize"
text = "ok"
"""


def _kill_while_planning(home: Home, k: KernelProcess, task_id: str) -> None:
    """SIGKILL `k` from outside while the task's model call is in flight under it."""
    _wait_state(home, task_id, "Planning")
    time.sleep(0.3)
    assert k.proc.poll() is None, k.output()
    k.kill()


def test_a_task_in_flight_during_outside_kills_is_asked_about_never_abandoned(
    tmp_path: Path,
) -> None:
    home = make_home(
        tmp_path / "home", templates={"slow": SLOW}, script=_slow_script(60), config=CONFIG
    )
    with _kernels(home) as started:
        k1 = _start(home, started)
        task_id = _submit(k1, "slow")
        _kill_while_planning(home, k1, task_id)  # death 1
        k2 = _start(home, started)
        assert task_record(home, task_id).recovery_attempts == 1
        _kill_while_planning(home, k2, task_id)  # death 2

        # what a restart would do, and why: what is known, not a guess
        dry = pfar(home, "recover", "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        (decision,) = json.loads(dry.stdout)["decisions"]
        assert decision["action"] == "ParkInFlight"
        assert decision["reason"] == (
            f"in flight during {MAX} kernel deaths in a row, no progress between them: "
            "the owner will be asked to resume or abandon it"
        )

        k3 = _start(home, started)
        assert _report(home, k3) == "System restarted. Recovery report:\n" + _parked_line(
            "Slow plan"
        )
        row = _wait_state(home, task_id, "AwaitingApproval")
        first = _pending(home, task_id)
        assert first.action_type == "in_flight_deaths"
        assert isinstance(row.payload, payloads.AwaitingApproval)
        assert row.payload.approval_id == first.approval_id
        body = _question(home, first.approval_id, resent=False)
        assert (
            f"Task Slow plan ({task_id[:8]}) was in flight (Planning) during {MAX} kernel "
            "deaths in a row, with no progress between them. pfar cannot tell whether it "
            "caused them. Resume it where it was, or abandon it?"
        ) in body
        short = first.approval_id[:8]
        assert f"pfar approve {short}  (resume) | pfar answer {short} abandon" in body
        k3.kill()  # before the answer: the question is re-sent, the task still waits

        k4 = _start(home, started)
        assert _report(home, k4) == (
            "System restarted. Recovery report:\n - 1 approval re-sent (Slow plan)"
        )
        assert "re-sent after restart" in _question(home, first.approval_id, resent=True)
        assert task_record(home, task_id).state == "AwaitingApproval"
        k4.request("answer", approval_id=short, decision="resume")
        row = _wait_state(home, task_id, "Planning")  # back where it was, counter reset
        assert row.recovery_attempts == 0
        (answered,) = [a for a in task_approvals(home, task_id) if a.status != "pending"]
        assert (answered.status, answered.decision) == ("approved", "resume")
        _kill_while_planning(home, k4, task_id)  # after the answer: death 1 of the resumed run

        k5 = _start(home, started)
        assert (
            _report(home, k5) == "System restarted. Recovery report:\n - 1 task retried (Slow plan)"
        )
        _kill_while_planning(home, k5, task_id)  # death 2 of the resumed run

        # the old "resume" is spent: the owner is asked again, with a new question
        k6 = _start(home, started)
        assert _report(home, k6) == "System restarted. Recovery report:\n" + _parked_line(
            "Slow plan"
        )
        _wait_state(home, task_id, "AwaitingApproval")
        second = _pending(home, task_id)
        assert second.approval_id != first.approval_id
        assert second.action_type == "in_flight_deaths"
        # the model answers at once now: resumed, the task finishes
        (home.root / "scripts" / "default.toml").write_text(_slow_script(0))
        k6.request("answer", approval_id=second.approval_id, decision="approve")
        _wait_state(home, task_id, "Completed")
        assert (home.workspace(task_id) / "n.txt").read_text() == "done"
        assert k6.terminate() == 0
    statuses = [(a.status, a.decision) for a in task_approvals(home, task_id)]
    assert statuses == [("approved", "resume"), ("approved", "resume")]


# -- a task that does kill the kernel each time it runs ----------------------------------


class KernelKiller:
    """A loopback HTTP server whose every request SIGKILLs the kernel that sent it (the
    newest boot in the journal, if the test started it): a read step that kills the
    kernel each time it runs, as a crashing tool would."""

    def __init__(self, home: Home, started: list[KernelProcess]) -> None:
        self.hits = 0
        killer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                killer.hits += 1
                pid = last_boot(home)["pid"]
                if pid in {k.proc.pid for k in started}:
                    os.kill(pid, signal.SIGKILL)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port!s}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


BOOM = 'id = "boom"\ndescription = "Fetch the page"\nallowed_tools = ["http.request"]\n'


def _boom_script(url: str) -> str:
    return f"""
[[responses]]
template = "boom"
phase = "plan"
[[responses.json.steps]]
tool = "http.request"
args = {{ method = "GET", url = "{url}/page" }}
"""


def _dies(k: KernelProcess) -> None:
    assert k.killed_by_fault(), k.output()  # SIGKILLed, by the step it ran


def test_a_task_that_kills_the_kernel_each_time_runs_nothing_until_the_owner_answers(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", templates={"boom": BOOM}, config=CONFIG)
    with _kernels(home) as started:
        server = KernelKiller(home, started)
        try:
            (home.root / "scripts" / "default.toml").write_text(_boom_script(server.url))
            k1 = _start(home, started)
            task_id = _submit(k1, "boom")
            _dies(k1)  # death 1: the read step ran, and the kernel died
            _dies(_start(home, started, ready=False))  # death 2: recovered, ran, died
            assert server.hits == MAX
            assert task_record(home, task_id).recovery_attempts == MAX - 1

            # parked: the kernel lives, and the step does not run again
            k3 = _start(home, started)
            assert _report(home, k3) == (
                "System restarted. Recovery report:\n" + _parked_line("Fetch the page")
            )
            row = _wait_state(home, task_id, "AwaitingApproval")
            assert isinstance(row.payload, payloads.AwaitingApproval)
            assert row.payload.in_flight is not None
            assert row.payload.in_flight.then.kind == "Executing"
            first = _pending(home, task_id)
            assert "(Executing, step 1 of 1)" in _question(home, first.approval_id, resent=False)
            time.sleep(1.0)
            assert k3.proc.poll() is None and server.hits == MAX
            k3.kill()  # before the answer

            k4 = _start(home, started)
            assert "re-sent after restart" in _question(home, first.approval_id, resent=True)
            assert server.hits == MAX
            with contextlib.suppress(Exception):  # the step may kill it before the reply
                k4.request("answer", approval_id=first.approval_id, decision="resume")
            _dies(k4)  # the owner's choice: it ran once more, and killed the kernel again
            _dies(_start(home, started, ready=False))  # and once more, recovered
            assert server.hits == 2 * MAX

            # asked again: the old "resume" is never taken as the answer to this one
            k6 = _start(home, started)
            _wait_state(home, task_id, "AwaitingApproval")
            second = _pending(home, task_id)
            assert second.approval_id != first.approval_id
            time.sleep(1.0)
            assert k6.proc.poll() is None and server.hits == 2 * MAX
            k6.request("answer", approval_id=second.approval_id[:8], decision="deny")
            row = _wait_state(home, task_id, "Abandoned")
            assert row.error == (
                f"Abandoned by the owner: it was in flight during {MAX} kernel deaths in a row, "
                "with no progress between them"
            )
            assert k6.terminate() == 0
        finally:
            server.close()
    statuses = [(a.status, a.decision) for a in task_approvals(home, task_id)]
    assert statuses == [("approved", "resume"), ("denied", "abandon")]
    assert server.hits == 2 * MAX
