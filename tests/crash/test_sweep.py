"""The crash sweep: SIGKILL the kernel right after every journal point a real task passes
through (and at random moments), restart it, and check that nothing was lost and no write
took effect twice.

The task reads and writes the outside world (a loopback HTTP server that honours
Idempotency-Key), writes a file in its workspace (idempotent by check) and runs a shell
command that appends a line to a log (no idempotency at all: a write in doubt goes to the
owner, who answers from the evidence, as a person would).
"""

from __future__ import annotations

import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pfar.journal.faults import POINTS
from pfar.vault.home import Home

from ..support import (
    BACKEND,
    KernelProcess,
    RecordingServer,
    make_home,
    owner_messages,
    pending_approvals,
    step_statuses,
    task_approvals,
    task_record,
    task_states,
)

# every test here runs on each journal backend
pytestmark = [pytest.mark.crash, pytest.mark.both_backends]

TERMINAL = {"Completed", "Failed", "Abandoned"}

TEMPLATE = """
    id = "sweep"
    description = "Sweep task"
    allowed_tools = ["http.request", "file.write", "shell.run"]
    [timeouts]
    step_seconds = 10
"""


def _script(url: str, shell_log: Path) -> str:
    shell = f'echo "$PFAR_TASK_ID" >> {shell_log}'
    steps = [
        f'{{ tool = "http.request", args = {{ method = "GET", url = "{url}/source/$input" }} }}',
        f'{{ tool = "http.request", args = {{ method = "POST", url = "{url}/post/$input", '
        'body = "p $input" } }',
        '{ tool = "file.write", args = { path = "out.txt", content = "report for $input\\n" } }',
        f'{{ tool = "http.request", args = {{ method = "GET", url = "{url}/check/$input" }} }}',
        f'{{ tool = "http.request", args = {{ method = "PUT", url = "{url}/put/$input", '
        'body = "u $input" } }',
        f'{{ tool = "shell.run", args = {{ argv = ["sh", "-c", \'{shell}\'] }} }}',
    ]
    lines = ",\n  ".join(steps)
    return f"""
[[responses]]
template = "sweep"
phase = "plan"
[responses.json]
steps = [
  {lines},
]

[[responses]]
template = "sweep"
phase = "synthesize"
text = "sweep $input done"
"""


# How many times one run of the task passes each journal point in the first boot. Reads
# journal only their outcome (no step_started); the last step_completed commits together
# with synthesizing.
WRITE_STEPS = (1, 2, 4, 5)  # POST, file.write, PUT, shell.run (0-based plan indexes)
N_STEPS = 6
IN_RUN: dict[str, int] = {
    "task_created": 1,
    "extracted": 1,
    "planned": 1,
    "step_started": len(WRITE_STEPS),
    "step_completed": N_STEPS,
    "synthesizing": 1,
    "completed": 1,
    # #1 is the boot's recovery report, #2 the task's result
    "message_delivered": 2,
    # every boot journals its recovery report: this one kills the first boot at startup
    "recovery_decided": 1,
}


def _single_boot_cases() -> list[Any]:
    cases = []
    for point in POINTS:
        n = IN_RUN.get(point, 0)
        if n == 0:
            cases.append(pytest.param([point], [False], id=f"{point}-not-reached"))
        for i in range(1, n + 1):
            spec = point if n == 1 else f"{point}:{i}"
            cases.append(pytest.param([spec], [True], id=spec))
    return cases


# Crashes during recovery: a fault for the first boot, then one for the recovering boot.
MULTI_BOOT_CASES = [
    # the shell write is in doubt: the recovering boot dies right after parking the question
    pytest.param(["step_started:4", "approval_parked"], [True, True], id="doubt-then-parked"),
    # ... or right after the owner's answer is durable
    pytest.param(["step_started:4", "approval_decided"], [True, True], id="doubt-then-decided"),
    # the recovering boot dies right after its decisions and report are durable (one commit)
    pytest.param(["step_started:2", "recovery_decided:1"], [True, True], id="recovery-decided"),
    pytest.param(["planned", "message_delivered:1"], [True, True], id="report-delivered"),
    # three crashes in a row, each further along
    pytest.param(
        ["step_completed:2", "step_started:1", "step_completed:2"],
        [True, True, True],
        id="three-crashes",
    ),
]


@dataclass
class Boot:
    fault: str | None
    ready: bool = False
    killed: bool = False
    boot_id: str | None = None
    code: int | None = None
    unfinished_before: int = 0  # tasks this boot found unfinished in the journal


@dataclass
class Run:
    home: Home
    server: RecordingServer
    shell_log: Path
    inputs: list[str]
    task_ids: list[str] = field(default_factory=list)
    boots: list[Boot] = field(default_factory=list)
    answers: list[tuple[str, str]] = field(default_factory=list)


def _home(tmp_path: Path, server: RecordingServer) -> tuple[Home, Path]:
    shell_log = tmp_path / "shell-effects.log"
    home = make_home(
        tmp_path / "home",
        # the loopback server honours Idempotency-Key: the template says so, so an
        # interrupted POST is retried with its key instead of asking the owner
        templates={
            "sweep": TEMPLATE
            + f'    [idempotency]\n    trusted_key_hosts = ["{server.url.split("//")[1]}"]\n'
        },
        script=_script(server.url, shell_log),
    )
    return home, shell_log


def _shell_ran(run: Run, task_id: str) -> bool:
    if not run.shell_log.exists():
        return False
    return task_id in run.shell_log.read_text().split()


def _answer_doubts(run: Run, k: KernelProcess) -> None:
    """Answer every pending question the way an owner would: from the evidence."""
    for r in pending_approvals(run.home):
        assert r.action_type == "write_in_doubt", r
        # only the shell step (no idempotency) may ever be put in doubt
        assert r.step == 5, r
        decision = "skip" if _shell_ran(run, r.task_id) else "retry"
        try:
            k.request("answer", approval_id=r.approval_id, decision=decision)
        except Exception:
            _wait_dead(k)
            return  # the kernel died (a fault) while answering; the next boot asks again
        run.answers.append((r.approval_id, decision))


def _settled(run: Run) -> bool:
    states = task_states(run.home)
    if not all(states.get(t) in TERMINAL for t in run.task_ids):
        return False
    delivered = {(m["kind"], m["task_id"]) for m in owner_messages(run.home)}
    return all(("result", t) in delivered for t in run.task_ids if states[t] == "Completed")


def _boot(
    run: Run,
    fault: str | None,
    expect_kill: bool,
    submit: bool,
    timeout: float,
    on_ready: Callable[[Run, KernelProcess], None] | None = None,
) -> Boot:
    boot = Boot(fault)
    boot.unfinished_before = sum(s not in TERMINAL for s in task_states(run.home).values())
    run.boots.append(boot)
    k = KernelProcess(run.home, fault=fault)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and k.proc.poll() is None:
            try:
                boot.boot_id = k.request("ping")["boot_id"]
                boot.ready = True
                break
            except Exception:
                time.sleep(0.02)
        if boot.ready and submit:
            for text in run.inputs:
                try:
                    r = k.request("submit", template="sweep", text=text, event_id=f"ev-{text}")
                except Exception:
                    _wait_dead(k)
                    break
                run.task_ids.append(r["task_id"])
            if len(run.task_ids) < len(run.inputs):
                # killed between submits: the journal holds whatever was created
                run.task_ids[:] = [t for t in task_states(run.home)]
        if boot.ready and on_ready is not None:
            on_ready(run, k)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and k.proc.poll() is None:
            if boot.ready:
                _answer_doubts(run, k)
            if not expect_kill and boot.ready and _settled(run):
                break
            time.sleep(0.03)
        if k.proc.poll() is None:
            assert not expect_kill, (
                f"fault {fault} was expected to kill the kernel but it is still running\n{_out(k)}"
            )
            boot.code = k.terminate()
            assert boot.code == 0, _out(k)
        else:
            boot.code = k.wait_exit()
            boot.killed = boot.code == -signal.SIGKILL
            assert boot.killed, f"kernel exited with {boot.code}:\n{_out(k)}"
            assert expect_kill, f"fault {fault} killed the kernel unexpectedly\n{_out(k)}"
            assert f"fault hook: SIGKILL after {fault.split(':')[0]}" in _out(k)
    finally:
        if k.proc.poll() is None:
            k.kill()
    return boot


def _check_invariants(run: Run) -> None:
    home, server = run.home, run.server
    states = task_states(home)
    assert len(run.task_ids) == len(run.inputs)
    assert len(states) == len(run.inputs), states  # an event id never creates a 2nd task
    # Every task reached Completed.
    assert {t: states[t] for t in run.task_ids} == {t: "Completed" for t in run.task_ids}

    # The far side applied every write exactly once, whatever was resent.
    keys_sent = Counter(r["key"] for r in server.writes())
    assert None not in keys_sent, "a write went out without an Idempotency-Key"
    assert all(n == 1 for n in server.effects.values()), server.effects
    expected_keys = {f"{t}:{i}" for t in run.task_ids for i in (1, 4)}
    assert set(server.effects) == expected_keys
    assert set(keys_sent) == expected_keys

    # The non-idempotent effect (shell append) happened exactly once per task.
    lines = Counter(run.shell_log.read_text().split())
    assert lines == Counter(run.task_ids), lines

    # The file has the right content, and no temp file was left behind.
    for tid, text in zip(run.task_ids, _inputs_by_task(run), strict=True):
        ws = home.workspace(tid)
        assert (ws / "out.txt").read_text() == f"report for {text}\n"
        assert not list(ws.glob("*.tmp")), list(ws.iterdir())

    # The journal agrees: every step completed or was skipped by the owner.
    for tid in run.task_ids:
        steps = step_statuses(home, tid)
        assert list(steps) == list(range(N_STEPS))
        for step, status in steps.items():
            ok = {"completed", "skipped"} if step == 5 else {"completed"}
            assert status in ok, (tid, step, status)

    msgs = owner_messages(home)
    # Each message reached the owner once.
    keys = Counter(m["key"] for m in msgs)
    assert all(n == 1 for n in keys.values()), [k for k, n in keys.items() if n > 1]
    # Exactly one result per task.
    results = Counter(m["task_id"] for m in msgs if m["kind"] == "result")
    assert results == Counter(run.task_ids), results
    # Exactly one recovery report per boot that came up (at most one per boot at all).
    reports = [m["key"] for m in msgs if m["kind"] == "report"]
    assert len(reports) <= len(run.boots)
    for boot in run.boots:
        if boot.ready:
            assert reports.count(f"report:{boot.boot_id}") == 1, (boot, reports)
            (body,) = [m["body"] for m in msgs if m["key"] == f"report:{boot.boot_id}"]
            assert _reported(body) == boot.unfinished_before, (boot, body)


_REPORT_LINE = re.compile(
    r"^ - (\d+) (?:tasks?|approvals?|credential prompts?) (retried|resumed|re-sent|abandoned)"
)


def _reported(body: str) -> int:
    """How many tasks a recovery report accounts for (none abandoned: all are young)."""
    if body == "System restarted. No pending tasks to recover.":
        return 0
    lines = body.splitlines()
    assert lines[0] == "System restarted. Recovery report:", body
    total = 0
    for line in lines[1:]:
        m = _REPORT_LINE.match(line)
        assert m is not None, line
        assert m.group(2) != "abandoned", body
        total += int(m.group(1))
    return total


def _inputs_by_task(run: Run) -> list[str]:
    return [task_record(run.home, t).input_text for t in run.task_ids]


@pytest.mark.parametrize(("faults", "expect_kill"), _single_boot_cases() + MULTI_BOOT_CASES)
def test_crash_at_every_journal_point(
    tmp_path: Path, http_server: RecordingServer, faults: list[str], expect_kill: list[bool]
) -> None:
    home, shell_log = _home(tmp_path, http_server)
    run = Run(home, http_server, shell_log, inputs=["job-a"])
    for i, (fault, kill) in enumerate(zip(faults, expect_kill, strict=True)):
        submit = i == 0 or not run.task_ids
        _boot(run, fault, kill, submit=submit, timeout=20)
    if not run.task_ids:  # every boot so far died before the task could be submitted
        _boot(run, None, False, submit=True, timeout=20)
    else:
        _boot(run, None, False, submit=False, timeout=20)
    _check_invariants(run)

    # Deterministic faults strike only after a commit, never mid-call of the step that
    # made it: every write went out exactly once. On a server's journal a commit awaits
    # the server, and the task's next step runs meanwhile: a kill at the recovery
    # report's delivery can land while the resumed first step (a read) is out, and a
    # read is made again after a crash, by design. On SQLite every request went out once.
    sent = Counter((r["method"], r["path"]) for r in http_server.requests)
    reads_again = BACKEND["name"] == "postgresql" and faults[-1].startswith("message_delivered")
    assert all(n == 1 or (reads_again and m == "GET") for (m, _), n in sent.items()), sent
    assert len(sent) == 4
    (tid,) = run.task_ids
    asked = [(a.action_type, a.status, a.decision) for a in task_approvals(home, tid)]
    if faults[0] == "step_started:4":
        # the shell write was in doubt: the owner was asked once, and (no evidence) said retry
        assert asked == [("write_in_doubt", "approved", "retry")]
    else:
        assert asked == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_kill_at_a_random_moment(tmp_path: Path, http_server: RecordingServer, seed: int) -> None:
    """SIGKILL after a random delay while five tasks are being submitted and run; restart,
    redeliver every event (an adapter does not know which ones were taken), and check."""
    rng = random.Random(seed)
    delay = rng.uniform(0.0, 0.8)  # submitting and running five tasks takes about 0.6 s
    home, shell_log = _home(tmp_path, http_server)
    inputs = [f"s{seed}-t{i}" for i in range(5)]
    run = Run(home, http_server, shell_log, inputs=inputs)

    k = KernelProcess(home)
    boot = Boot(None)
    run.boots.append(boot)
    acked: dict[str, str] = {}
    try:
        k.wait_ready()
        boot.ready = True
        boot.boot_id = k.request("ping")["boot_id"]
        killer = threading.Timer(delay, k.proc.send_signal, (signal.SIGKILL,))
        killer.start()
        for text in inputs:
            try:
                r = k.request("submit", template="sweep", text=text, event_id=f"ev-{text}")
            except Exception:
                _wait_dead(k)
                break
            acked[text] = r["task_id"]
        killer.join()
        assert k.wait_exit() == -signal.SIGKILL
    finally:
        k.kill()
    boot.killed = True
    at_kill = Counter(task_states(home).values())
    print(f"seed {seed}: killed after {delay:.3f}s, states {dict(at_kill)}")

    def redeliver(r: Run, kp: KernelProcess) -> None:
        for text in inputs:
            got = kp.request("submit", template="sweep", text=text, event_id=f"ev-{text}")
            # a redelivered event that was taken before the crash returns its task
            assert acked.get(text, got["task_id"]) == got["task_id"]
            r.task_ids.append(got["task_id"])

    _boot(run, None, False, submit=False, timeout=30, on_ready=redeliver)
    assert len(set(run.task_ids)) == len(inputs)
    _check_invariants(run)
    # a write in doubt is only ever the shell step, once per task at most
    assert len(run.answers) <= len(inputs)


def _out(k: KernelProcess) -> str:
    return k.stdout_path.read_text(errors="replace")


def _wait_dead(k: KernelProcess, timeout: float = 10.0) -> None:
    """A control call failed: that is only fine when the kernel is dying of its fault."""
    try:
        k.proc.wait(timeout=timeout)
    except Exception:
        raise AssertionError(f"control call failed but the kernel lives:\n{_out(k)}") from None
