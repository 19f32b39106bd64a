"""The persistence spec's regression table (§11), R1-R5 and R8-R12, against a real kernel.

Every test runs `pfar run` as a child process, kills it (SIGKILL at a named journal
point through the fault hook, SIGKILL at a chosen moment, or SIGTERM), starts it
again on the same home, and checks what the vault, the owner log and the far side
say. R6 (Telegram offset) and R7 (containers) arrive with adapters and containers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pfar.vault.home import Home

from ..support import (
    KernelProcess,
    RecordingServer,
    age_task,
    db,
    last_boot,
    make_home,
    owner_messages,
    read_journal,
    running_kernel,
    step_statuses,
    task_approvals,
    task_of_event,
    task_record,
    task_states,
    wait_for,
)

pytestmark = pytest.mark.crash

TERMINAL = ("Completed", "Failed", "Abandoned")
CLEAN_REPORT = "System restarted. No pending tasks to recover."


# -- building homes: templates and the scripted model's file ------------------------


def _toml(value: Any) -> str:
    """A TOML value (inline) for plain JSON-like data."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def template(tid: str, title: str, tools: list[str], extra: str = "") -> str:
    return f"id = {_toml(tid)}\ndescription = {_toml(title)}\nallowed_tools = {_toml(tools)}\n" + (
        textwrap.dedent(extra)
    )


def plan(tid: str, steps: list[tuple[str, dict[str, Any]]], delay: float = 0) -> str:
    """A scripted plan response for template `tid`: (tool, args) per step."""
    out = f'[[responses]]\ntemplate = {_toml(tid)}\nphase = "plan"\n'
    if delay:
        out += f"delay_seconds = {delay}\n"
    if not steps:
        return out + "json = { steps = [] }\n"
    for i, (tool, args) in enumerate(steps):
        out += (
            f"[[responses.json.steps]]\ntool = {_toml(tool)}\n"
            f"description = {_toml(f'step {i + 1}')}\nargs = {_toml(args)}\n"
        )
    return out


def synth(tid: str = "*", delay: float = 0) -> str:
    out = f'[[responses]]\ntemplate = {_toml(tid)}\nphase = "synthesize"\n'
    if delay:
        out += f"delay_seconds = {delay}\n"
    return out + 'text = "done ($template)."\n'


def script(*parts: str) -> str:
    return "\n".join([*parts, synth()])


def write_script(home: Home, *parts: str) -> None:
    """Replace the scripted model's file (read at kernel start) between two boots."""
    (home.root / "scripts" / "default.toml").write_text(script(*parts))


def shell_append(log: Path, tag: str, then: str = "") -> dict[str, Any]:
    """shell.run args appending `tag` to `log` (the write whose repetitions we count)."""
    return {"argv": ["sh", "-c", f"echo {tag} >> {log}{'; ' + then if then else ''}"]}


def lines_of(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


# -- talking to kernels and reading the vault ------------------------------------


def submit(k: KernelProcess, tid: str, text: str = "go") -> str:
    """Submit; when the kernel dies under the call (an early fault), find the task by event."""
    event_id = str(uuid.uuid4())
    try:
        return str(k.request("submit", template=tid, text=text, event_id=event_id)["task_id"])
    except Exception:
        found = wait_for(lambda: task_of_event(k.home, event_id), what="the submitted task")
        return str(found)


def output(k: KernelProcess) -> str:
    """The kernel's stdout+stderr; also after it exited (KernelProcess.output() needs it open)."""
    return k.stdout_path.read_text(errors="replace")


def rows(home: Home, sql: str, *args: Any) -> list[Any]:
    """Rows of SQL on the home's SQLite journal: for a test of SQLite's file itself (a
    test that runs on both backends reads through the store's verbs instead)."""
    with contextlib.closing(db(home)) as conn:
        return conn.execute(sql, args).fetchall()


def wait_state(home: Home, task_id: str, state: str, timeout: float = 20.0) -> None:
    """Wait for `state`; fail at once (with the task's error) if it ends elsewhere."""

    def reached() -> bool:
        now = task_states(home).get(task_id)
        if now != state and now in TERMINAL:
            error = task_record(home, task_id).error
            raise AssertionError(f"task {task_id[:8]} ended {now}, not {state}: {error}")
        return now == state

    wait_for(reached, timeout, f"task {task_id[:8]} to reach {state}")


def reports(home: Home) -> list[dict[str, Any]]:
    return [m for m in owner_messages(home) if m["kind"] == "report"]


def boot_report(home: Home, k: KernelProcess) -> str:
    """The recovery report of the boot `k` is running (waits until it reaches owner.log)."""
    key = f"report:{k.request('ping')['boot_id']}"
    found = wait_for(
        lambda: [m for m in reports(home) if m["key"] == key], what=f"the report {key}"
    )
    assert len(found) == 1, found
    return str(found[0]["body"])


def boot(home: Home, fault: str | None = None, env: dict[str, str] | None = None) -> KernelProcess:
    k = KernelProcess(home, fault=fault, env=env)
    try:
        k.wait_ready()
    except BaseException:
        k.kill()
        raise
    return k


@contextlib.contextmanager
def kernel(
    home: Home, fault: str | None = None, env: dict[str, str] | None = None
) -> Iterator[KernelProcess]:
    """A kernel that is SIGKILLed (not stopped) if the test leaves it running."""
    k = boot(home, fault, env)
    try:
        yield k
    finally:
        if k.proc.poll() is None:
            k.kill()


def minutes_ago(minutes: float) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=minutes)


def quiet(server: RecordingServer) -> None:
    """The kernel is killed mid-request on purpose: don't print the far side's broken pipe."""
    server._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]


# -- R1 ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r1_resume_from_step_2_after_kill_after_first_step(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    url = http_server.url
    home = make_home(
        tmp_path / "home",
        templates={"r1": template("r1", "Three calls", ["http.request"])},
        script=script(
            plan(
                "r1",
                [
                    ("http.request", {"method": "GET", "url": f"{url}/read"}),
                    ("http.request", {"method": "POST", "url": f"{url}/write2", "body": "b"}),
                    ("http.request", {"method": "POST", "url": f"{url}/write3", "body": "c"}),
                ],
            )
        ),
    )
    k = boot(home, fault="step_completed:1")
    tid = submit(k, "r1")
    assert k.killed_by_fault(), output(k)
    assert task_states(home)[tid] == "Executing"
    assert step_statuses(home, tid)[0] == "completed"
    assert task_record(home, tid).current_step == 1
    assert [r["path"] for r in http_server.requests].count("/read") == 1
    killed = last_boot(home)
    assert killed["clean"] is False  # the killed boot never ended

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        wait_state(home, tid, "Completed")

    assert report == (
        "System restarted. Recovery report:\n - 1 task resumed (Three calls — step 2 of 3)"
    )
    paths = [r["path"] for r in http_server.requests]
    assert paths.count("/read") == 1, "the completed read step ran again"
    assert paths.count("/write3") == 1
    assert http_server.effects == {f"{tid}:1": 1, f"{tid}:2": 1}
    assert step_statuses(home, tid) == {0: "completed", 1: "completed", 2: "completed"}
    # the restarted boot ended cleanly
    restarted = last_boot(home)
    assert restarted["boot_id"] != killed["boot_id"] and restarted["clean"] is True


# -- R2 ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r2_approval_resent_after_kill_then_approved_write_runs_once(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    url = http_server.url
    home = make_home(
        tmp_path / "home",
        templates={
            "r2": template(
                "r2",
                "Publish the summary",
                ["http.request"],
                """
                [approval]
                require = ["http.request"]
                on_deny = "fail"
                """,
            )
        },
        script=script(
            plan("r2", [("http.request", {"method": "POST", "url": f"{url}/publish", "body": "x"})])
        ),
    )
    k = boot(home, fault="approval_parked")
    tid = submit(k, "r2")
    assert k.killed_by_fault(), output(k)
    assert task_states(home)[tid] == "AwaitingApproval"
    (approval_id,) = [a.approval_id for a in task_approvals(home, tid)]
    assert http_server.requests == []

    with running_kernel(home) as k2:
        second_boot = k2.request("ping")["boot_id"]
        report = boot_report(home, k2)
        assert report == (
            "System restarted. Recovery report:\n - 1 approval re-sent (Publish the summary)"
        )
        resent = wait_for(
            lambda: [
                m
                for m in owner_messages(home)
                if m["kind"] == "approval" and m["key"] == f"approval:{approval_id}:1"
            ],
            what="the re-sent approval",
        )
        assert resent[0]["task_id"] == tid
        assert resent[0]["body"].startswith(f"Approval re-sent after restart [{approval_id[:8]}]")
        assert task_states(home)[tid] == "AwaitingApproval"
        assert http_server.requests == []

        answer = k2.request("answer", approval_id=approval_id, decision="approve")
        assert answer["changed"] is True
        wait_state(home, tid, "Completed")

    assert [a.status for a in task_approvals(home, tid)] == ["approved"]
    assert [r["path"] for r in http_server.writes()] == ["/publish"]
    assert http_server.effects == {f"{tid}:0": 1}
    # the report precedes the re-sent prompt in the owner's log
    keys = [m["key"] for m in owner_messages(home)]
    assert keys.index(f"approval:{approval_id}:1") > keys.index(f"report:{second_boot}")


# -- R3 ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r3_killed_while_planning_is_retried_from_scratch_without_duplicates(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    url = http_server.url
    log = tmp_path / "effects.log"
    home = make_home(
        tmp_path / "home",
        templates={"r3": template("r3", "Plan then act", ["http.request", "shell.run"])},
        script=script(
            plan(
                "r3",
                [
                    ("http.request", {"method": "POST", "url": f"{url}/create", "body": "x"}),
                    ("shell.run", shell_append(log, "shell")),
                ],
            )
        ),
    )
    k = boot(home, fault="extracted")
    tid = submit(k, "r3")
    assert k.killed_by_fault(), output(k)
    row = task_record(home, tid)
    assert row.state == "Planning"
    assert row.plan is None

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        wait_state(home, tid, "Completed")

    assert report == "System restarted. Recovery report:\n - 1 task retried (Plan then act)"
    assert http_server.effects == {f"{tid}:0": 1}
    assert len(http_server.writes()) == 1
    assert lines_of(log) == ["shell"]
    assert step_statuses(home, tid) == {0: "completed", 1: "completed"}


# -- R4 ---------------------------------------------------------------------------

IN_DOUBT = (
    "I was interrupted while executing 'shell.run'. It may have already completed. "
    "Should I retry it?"
)


@pytest.mark.both_backends
def test_r4_shell_write_in_doubt_asks_the_owner_then_retries(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    home = make_home(
        tmp_path / "home",
        templates={"r4": template("r4", "Announce", ["file.write", "shell.run"])},
        script=script(
            plan(
                "r4",
                [
                    ("file.write", {"path": "draft.md", "content": "hello"}),
                    ("shell.run", shell_append(log, "announce")),
                ],
            )
        ),
    )
    # step_started #1 is file.write's (a Write too); #2 is the shell step's
    k = boot(home, fault="step_started:2")
    tid = submit(k, "r4")
    assert k.killed_by_fault(), output(k)
    assert step_statuses(home, tid) == {0: "completed", 1: "started"}
    before = len(lines_of(log))
    assert before in (0, 1)

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        assert report == (
            "System restarted. Recovery report:\n"
            " - 1 task resumed at a write in doubt: the owner is asked to retry, skip or fail "
            "(Announce — step 2 of 2)"
        )
        wait_state(home, tid, "AwaitingApproval")
        (q,) = task_approvals(home, tid)
        assert q.action_type == "write_in_doubt"
        assert q.description.startswith(IN_DOUBT)
        assert q.tool == "shell.run"
        assert q.step == 1
        assert q.options == ["retry", "skip", "fail"]
        asked = wait_for(
            lambda: [
                m
                for m in owner_messages(home)
                if m["kind"] == "approval" and m["task_id"] == tid and IN_DOUBT in m["body"]
            ],
            what="the owner to be asked about the write in doubt",
        )
        assert len(asked) == 1
        assert len(lines_of(log)) == before, "the write in doubt was retried without asking"

        k2.request("answer", approval_id=q.approval_id, decision="retry")
        wait_state(home, tid, "Completed")

    assert lines_of(log) == ["announce"] * (before + 1)
    assert step_statuses(home, tid) == {0: "completed", 1: "completed"}


@pytest.mark.both_backends
def test_r4_shell_write_that_ran_before_the_kill_is_skipped_on_the_owners_word(
    tmp_path: Path,
) -> None:
    log = tmp_path / "effects.log"
    pidfile = tmp_path / "shell.pid"
    home = make_home(
        tmp_path / "home",
        templates={"r4": template("r4", "Announce", ["shell.run"])},
        script=script(
            plan(
                "r4",
                [
                    (
                        "shell.run",
                        shell_append(log, "announce", f"echo $$ > {pidfile}; exec sleep 30"),
                    )
                ],
            )
        ),
    )
    try:
        with kernel(home) as k:
            tid = submit(k, "r4")
            wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the shell")
            assert lines_of(log) == ["announce"]
            k.kill()
        assert step_statuses(home, tid) == {0: "started"}

        with running_kernel(home) as k2:
            report = boot_report(home, k2)
            # the shell step was in flight: the owner is asked before it runs again
            assert report == (
                "System restarted. Recovery report:\n"
                " - 1 task resumed at a write in doubt: the owner is asked to retry, skip or "
                "fail (Announce — step 1 of 1)\n"
                " - 1 orphaned process cleaned up"  # the `sleep 30` it left running
            )
            wait_state(home, tid, "AwaitingApproval")
            (q,) = task_approvals(home, tid)
            assert q.action_type == "write_in_doubt"
            assert q.description.startswith(IN_DOUBT)
            k2.request("answer", approval_id=q.approval_id, decision="skip")
            wait_state(home, tid, "Completed")
    finally:
        with contextlib.suppress(ValueError, ProcessLookupError, FileNotFoundError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the orphaned `sleep 30`

    assert lines_of(log) == ["announce"]
    assert step_statuses(home, tid) == {0: "skipped"}


@pytest.mark.both_backends
def test_r4_http_write_in_doubt_is_retried_with_the_same_idempotency_key(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    quiet(http_server)
    url = http_server.url
    trusted = f'[idempotency]\ntrusted_key_hosts = ["{url.split("//")[1]}"]\n'
    home = make_home(
        tmp_path / "home",
        templates={
            "r4": template("r4", "Place the order", ["file.write", "http.request"], trusted)
        },
        script=script(
            plan(
                "r4",
                [
                    ("file.write", {"path": "order.json", "content": "{}"}),
                    ("http.request", {"method": "POST", "url": f"{url}/orders", "body": "one"}),
                ],
            )
        ),
    )
    http_server.hold()  # the far side has the request and waits; the kernel dies meanwhile
    with kernel(home) as k:
        tid = submit(k, "r4")
        wait_for(http_server.writes, what="the POST to reach the far side")
        k.kill()
    key = f"{tid}:1"
    assert step_statuses(home, tid) == {0: "completed", 1: "started"}
    http_server.release()
    wait_for(lambda: http_server.effects.get(key) == 1, what="the far side to apply the POST")

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        wait_state(home, tid, "Completed")

    assert report == (
        "System restarted. Recovery report:\n"
        " - 1 task resumed at a write the crash cut off: it is checked, or sent again under "
        "its idempotency key; one that needs your approval asks you again first "
        "(Place the order — step 2 of 2)"
    )
    assert task_approvals(home, tid) == []
    writes = http_server.writes()
    assert [(w["path"], w["key"]) for w in writes] == [("/orders", key), ("/orders", key)]
    assert http_server.effects == {key: 1}
    result = read_journal(home, lambda s: s.tasks.step(tid, 1))
    assert result is not None and isinstance(result.result, dict)
    assert json.loads(str(result.result["body"]))["replay"] is True
    assert not [m for m in owner_messages(home) if m["kind"] == "approval"]


@pytest.mark.both_backends
def test_r4_post_to_a_host_not_trusted_with_keys_asks_the_owner(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    """Most POST endpoints ignore Idempotency-Key: unless the template says this host
    honours it, a POST that may have happened is the owner's call, not a blind retry."""
    quiet(http_server)
    url = http_server.url
    home = make_home(
        tmp_path / "home",
        templates={"r4": template("r4", "Post the message", ["http.request"])},
        script=script(
            plan("r4", [("http.request", {"method": "POST", "url": f"{url}/chat", "body": "hi"})])
        ),
    )
    http_server.hold()
    with kernel(home) as k:
        tid = submit(k, "r4")
        wait_for(http_server.writes, what="the POST to reach the far side")
        k.kill()
    http_server.release()
    wait_for(lambda: http_server.effects.get(f"{tid}:0") == 1, what="the far side to apply it")

    with running_kernel(home) as k2:
        boot_report(home, k2)
        wait_state(home, tid, "AwaitingApproval")
        (approval,) = task_approvals(home, tid)
        assert approval.action_type == "write_in_doubt"
        assert len(http_server.writes()) == 1  # not sent again while the owner decides
        k2.request("answer", approval_id=approval.approval_id, decision="skip")
        wait_state(home, tid, "Completed")
    assert len(http_server.writes()) == 1
    assert step_statuses(home, tid) == {0: "skipped"}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended; only its parent has not reaped it


@pytest.mark.both_backends
def test_r4_an_approved_write_interrupted_mid_run_asks_again(tmp_path: Path) -> None:
    """The owner's approval covered one run: if that run is cut off, the owner is asked
    about the write in doubt instead of it silently running a second time."""
    log = tmp_path / "ran.log"
    home = make_home(
        tmp_path / "home",
        templates={
            "r4": template("r4", "Release", ["shell.run"], '[approval]\nrequire = ["shell.run"]\n')
        },
        script=script(
            plan("r4", [("shell.run", {"argv": ["sh", "-c", f"echo ran >> {log}; sleep 30"]})])
        ),
    )
    with kernel(home) as k:
        tid = submit(k, "r4")
        wait_state(home, tid, "AwaitingApproval")
        (approval_id,) = [a.approval_id for a in task_approvals(home, tid)]
        k.request("answer", approval_id=approval_id, decision="approve")
        wait_for(lambda: log.exists() and log.read_text().strip(), what="the command to start")
        k.kill()

    ((_, step, process),) = read_journal(home, lambda s: s.tasks.started_processes(tid))
    assert step == 0
    pid = process["pid"]
    assert Path(f"/proc/{pid}").exists()  # the command outlived the kernel

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        assert " - 1 orphaned process cleaned up" in report
        wait_for(lambda: not _alive(pid), what="the orphaned command to be ended")
        wait_state(home, tid, "AwaitingApproval")
        pending = [a for a in task_approvals(home, tid) if a.status == "pending"]
        assert [p.action_type for p in pending] == ["write_in_doubt"]
        assert log.read_text().split() == ["ran"]
        k2.request("answer", approval_id=pending[0].approval_id, decision="fail")
        wait_state(home, tid, "Failed")
    assert log.read_text().split() == ["ran"]


# -- R5 ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r5_only_tasks_younger_than_max_age_are_recovered(tmp_path: Path) -> None:
    templates = {
        "r5": template("r5", "Book a table", ["file.write"]),
    }
    steps = [("file.write", {"path": "booking.txt", "content": "$input"})]
    home = make_home(
        tmp_path / "home",
        templates=templates,
        script=script(plan("r5", steps, delay=30)),
        config="""
            [recovery]
            max_task_age_seconds = 600
        """,
    )
    with kernel(home) as k:
        young, old, older = (submit(k, "r5", text) for text in ("young", "old", "older"))
        for tid in (young, old, older):
            wait_state(home, tid, "Planning")
        k.kill()
    age_task(home, young, minutes_ago(5))
    age_task(home, old, minutes_ago(15))
    age_task(home, older, minutes_ago(25))
    write_script(home, plan("r5", steps))  # the retried plan answers at once

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        wait_state(home, young, "Completed")

    assert report == (
        "System restarted. Recovery report:\n"
        " - 1 task retried (Book a table)\n"
        " - 2 tasks abandoned (too old: Book a table from 25 min ago, "
        "Book a table from 15 min ago)"
    )
    assert task_states(home) == {young: "Completed", old: "Abandoned", older: "Abandoned"}
    for tid, minutes in ((old, 15), (older, 25)):
        err = task_record(home, tid).error or ""
        assert "max recovery age" in err, err
        assert f"({minutes} min old)" in err, err
        assert step_statuses(home, tid) == {}
    assert (home.workspace(young) / "booking.txt").read_text() == "young"
    assert not home.workspace(old).exists()


# -- R8 ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r8_sigterm_lets_in_flight_tasks_finish_and_shuts_down_cleanly(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        templates={"r8": template("r8", "Write a note", ["file.write"])},
        script="\n".join(
            [
                plan("r8", [("file.write", {"path": "note.txt", "content": "$input"})]),
                # long enough that both tasks are seen Synthesizing (each look opens the
                # journal) and still are when SIGTERM comes, however busy the machine
                synth("r8", delay=5),
            ]
        ),
    )
    k = boot(home)
    boot_id = k.request("ping")["boot_id"]
    a, b = submit(k, "r8", "first"), submit(k, "r8", "second")
    for tid in (a, b):
        wait_state(home, tid, "Synthesizing")
    code = k.terminate(timeout=30)

    out = output(k)
    assert code == 0, out
    assert "shut down cleanly" in out
    assert "left in the journal" not in out
    assert task_states(home) == {a: "Completed", b: "Completed"}
    assert last_boot(home)["boot_id"] == boot_id and last_boot(home)["clean"] is True
    results = {m["task_id"] for m in owner_messages(home) if m["kind"] == "result"}
    assert results == {a, b}


# -- R9 ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r9_shutdown_timeout_leaves_the_slow_task_for_the_next_start(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    quiet(http_server)
    url = http_server.url
    home = make_home(
        tmp_path / "home",
        templates={"r9": template("r9", "Slow sync", ["file.write", "http.request"])},
        script=script(
            plan(
                "r9",
                [
                    ("file.write", {"path": "start.txt", "content": "go"}),
                    ("http.request", {"method": "GET", "url": f"{url}/slow"}),
                    ("http.request", {"method": "POST", "url": f"{url}/done", "body": "x"}),
                ],
            )
        ),
        config="""
            [recovery]
            shutdown_timeout_seconds = 1
        """,
    )
    http_server.delay_seconds = 30
    k = boot(home)
    boot_id = k.request("ping")["boot_id"]
    tid = submit(k, "r9")
    wait_for(lambda: http_server.requests, what="the slow read to reach the far side")
    code = k.terminate(timeout=20)

    out = output(k)
    assert code == 0, out
    assert "1 task(s) left in the journal" in out
    assert "shut down cleanly" in out
    assert task_states(home)[tid] == "Executing"
    assert task_record(home, tid).current_step == 1
    assert step_statuses(home, tid) == {0: "completed"}
    assert last_boot(home)["boot_id"] == boot_id and last_boot(home)["clean"] is True
    assert http_server.writes() == []

    http_server.delay_seconds = 0
    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        wait_state(home, tid, "Completed")

    assert report == (
        "System restarted. Recovery report:\n - 1 task resumed (Slow sync — step 2 of 3)"
    )
    assert [r["path"] for r in http_server.requests] == ["/slow", "/slow", "/done"]
    assert http_server.effects == {f"{tid}:2": 1}


# -- R10 --------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r10_credential_prompt_resent_after_kill_and_secret_never_leaks(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    url = http_server.url
    secret = f"ntn-{uuid.uuid4().hex}"
    home = make_home(
        tmp_path / "home",
        templates={
            # the token goes only where the template's author sends it: this host's header
            "r10": template(
                "r10",
                "Create a Notion page",
                ["admin.prompt_credential", "http.request"],
                f"""
                [[credentials]]
                tool = "http.request"
                host = "{urlsplit(url).netloc}"
                headers = {{ Authorization = "Bearer {{{{secret:notion_token}}}}" }}
                """,
            )
        },
        script=script(
            plan(
                "r10",
                [
                    (
                        "admin.prompt_credential",
                        {
                            "service": "notion",
                            "credential_type": "integration_token",
                            "instructions": "Create an internal integration and paste its token.",
                            "vault_ref": "vault:notion_token",
                        },
                    ),
                    (
                        "http.request",
                        {
                            "method": "POST",
                            "url": f"{url}/pages",
                            "body": "page",
                        },
                    ),
                ],
            )
        ),
    )
    k = boot(home, fault="credential_parked")
    tid = submit(k, "r10")
    assert k.killed_by_fault(), output(k)
    assert task_states(home)[tid] == "AwaitingCredential"
    (prompt_id,) = [
        p.prompt_id for p in read_journal(home, lambda s: s.questions.credential_prompts())
    ]

    with running_kernel(home) as k2:
        report = boot_report(home, k2)
        assert report == (
            "System restarted. Recovery report:\n"
            " - 1 credential prompt re-sent (Create a Notion page)"
        )
        # numbered like approvals: the original is :0, the first re-send :1
        resent = wait_for(
            lambda: [
                m
                for m in owner_messages(home)
                if m["kind"] == "credential" and m["key"] == f"credential:{prompt_id}:1"
            ],
            what="the re-sent credential prompt",
        )
        assert len(resent) == 1, resent
        assert resent[0]["body"].startswith(
            f"Credential request re-sent after restart [{prompt_id[:8]}]: notion"
        )
        assert http_server.requests == []

        k2.request("credential", prompt_id=prompt_id, secret=secret)
        wait_state(home, tid, "Completed")

        def leaks() -> list[str]:
            files = [
                home.sessions_db,
                home.sessions_db.with_name("sessions.db-wal"),
                home.audit_log,
                home.owner_log,
                k2.stdout_path,
            ]
            return [f.name for f in files if f.exists() and secret.encode() in f.read_bytes()]

        assert leaks() == []  # while running: the WAL holds the latest commits

    assert leaks() == []  # after the clean shutdown's checkpoint and audit flush
    received = read_journal(home, lambda s: s.questions.credential_prompt(prompt_id))
    assert received.status == "received"
    (post,) = http_server.writes()
    assert post["headers"]["Authorization"] == f"Bearer {secret}"
    assert http_server.effects == {f"{tid}:1": 1}
    assert step_statuses(home, tid) == {0: "completed", 1: "completed"}


# -- R11 --------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r11_one_report_lists_retried_resumed_reprompted_and_abandoned(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    quiet(http_server)
    url = http_server.url

    def parts(slow: bool) -> list[str]:
        d = 30 if slow else 0
        return [
            plan("planner", [], delay=d),
            plan("old", [], delay=d),
            plan(
                "reader",
                [
                    ("file.write", {"path": "a.txt", "content": "a"}),
                    ("http.request", {"method": "GET", "url": f"{url}/slow"}),
                    ("file.write", {"path": "b.txt", "content": "$step1"}),
                ],
            ),
            plan("synth", []),
            synth("synth", delay=d),
            plan("approve", [("file.write", {"path": "c.txt", "content": "c"})]),
        ]

    home = make_home(
        tmp_path / "home",
        templates={
            "planner": template("planner", "Slow planner", []),
            "old": template("old", "Old planner", []),
            "reader": template("reader", "Slow reader", ["file.write", "http.request"]),
            "synth": template("synth", "Slow synthesizer", []),
            "approve": template(
                "approve",
                "Needs approval",
                ["file.write"],
                '[approval]\nrequire = ["file.write"]\n',
            ),
        },
        script=script(*parts(slow=True)),
    )
    http_server.delay_seconds = 30
    with kernel(home) as k:
        first_boot = k.request("ping")["boot_id"]
        ids = {name: submit(k, name) for name in ("planner", "old", "reader", "synth", "approve")}
        for name, state in (
            ("planner", "Planning"),
            ("old", "Planning"),
            ("reader", "Executing"),
            ("synth", "Synthesizing"),
            ("approve", "AwaitingApproval"),
        ):
            wait_state(home, ids[name], state)
        wait_for(lambda: http_server.requests, what="the slow read to be in flight")
        k.kill()
    # a deterministic order in the report (oldest first) and one task past the max age
    for name, minutes in (("old", 20), ("planner", 4), ("reader", 3), ("synth", 2)):
        age_task(home, ids[name], minutes_ago(minutes))
    write_script(home, *parts(slow=False))
    http_server.delay_seconds = 0

    with running_kernel(home) as k2:
        second_boot = k2.request("ping")["boot_id"]
        report = boot_report(home, k2)
        assert report == (
            "System restarted. Recovery report:\n"
            " - 1 task retried (Slow planner)\n"
            " - 2 tasks resumed (Slow reader — step 2 of 3, Slow synthesizer)\n"
            " - 1 approval re-sent (Needs approval)\n"
            " - 1 task abandoned (too old: Old planner from 20 min ago)"
        )
        (approval_id,) = [
            a.approval_id for a in task_approvals(home, ids["approve"]) if a.status == "pending"
        ]
        k2.request("answer", approval_id=approval_id, decision="approve")
        for name in ("planner", "reader", "synth", "approve"):
            wait_state(home, ids[name], "Completed")
    assert task_states(home)[ids["old"]] == "Abandoned"

    with running_kernel(home) as k3:
        third_boot = k3.request("ping")["boot_id"]
        assert boot_report(home, k3) == CLEAN_REPORT

    assert last_boot(home)["boot_id"] == third_boot
    boots = [first_boot, second_boot, third_boot]
    assert [m["key"] for m in reports(home)] == [f"report:{b}" for b in boots]
    assert [m["body"] for m in reports(home)] == [CLEAN_REPORT, report, CLEAN_REPORT]


# -- R12 --------------------------------------------------------------------------


@pytest.mark.both_backends
def test_r12_clean_restart_reports_no_pending_tasks(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        templates={"r12": template("r12", "Write a note", ["file.write"])},
        script=script(plan("r12", [("file.write", {"path": "n.txt", "content": "$input"})])),
    )
    with running_kernel(home) as k:
        tid = submit(k, "r12", "hello")
        wait_state(home, tid, "Completed")
    assert k.proc.returncode == 0
    first = last_boot(home)
    assert first["clean"] is True

    with running_kernel(home) as k2:
        body = boot_report(home, k2)
    assert body == "System restarted. No pending tasks to recover."
    assert len(reports(home)) == 2
    second = last_boot(home)
    assert second["boot_id"] != first["boot_id"] and second["clean"] is True


@pytest.mark.both_backends
def test_r11_abandonment_is_reported_even_if_the_kernel_dies_during_recovery(
    tmp_path: Path,
) -> None:
    """A task abandoned by a boot that dies before its report goes out is still reported."""
    home = make_home(
        tmp_path / "home",
        templates={"old": template("old", "Old job", [])},
        script=script(plan("old", [], delay=30)),
    )
    with kernel(home) as k:
        first_boot = k.request("ping")["boot_id"]
        tid = submit(k, "old")
        wait_state(home, tid, "Planning")
        k.kill()
    age_task(home, tid, minutes_ago(20))
    dying = KernelProcess(home, fault="recovery_decided")  # dies in its own recovery
    try:
        assert dying.killed_by_fault(timeout=20), output(dying)
    finally:
        dying.kill()
    assert task_states(home)[tid] == "Abandoned"
    dead_boot = last_boot(home)
    assert dead_boot["boot_id"] != first_boot and dead_boot["clean"] is False

    with running_kernel(home) as k2:
        third_boot = k2.request("ping")["boot_id"]
        assert boot_report(home, k2) == CLEAN_REPORT

    told = [
        m["key"]
        for m in reports(home)
        if "\n - 1 task abandoned (too old: Old job from 20 min ago)" in m["body"]
    ]
    boots = [first_boot, dead_boot["boot_id"], third_boot]
    assert told == [f"report:{boots[1]}"], [m["body"] for m in owner_messages(home)]
    assert [m["key"] for m in reports(home)] == [f"report:{b}" for b in boots]
