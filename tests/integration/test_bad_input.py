"""Bad input, through the real `pfar` command: every mistake gets a clear error that names
the file, field or id involved, and nothing already stored is lost or overwritten."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from pfar.cli.client import RemoteError, call
from pfar.tools.registry import ToolRegistry
from pfar.vault.driver import sqlite
from pfar.vault.home import Home

from ..support import (
    KernelProcess,
    db,
    make_home,
    pfar,
    running_kernel,
    said,
    task_states,
    vault_db,
    wait_for,
)

TERMINAL = {"Completed", "Failed", "Abandoned", "Cancelled"}


def digest(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file under `root` and the sha256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in skip
    }


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie is dead


# -- the vault -----------------------------------------------------------------------


def test_run_without_a_vault_says_run_pfar_init(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    for args in (("run", "--no-stdin"), ("tasks",), ("recover", "--dry-run")):
        r = pfar(empty, *args)
        assert r.returncode == 1, (args, said(r))
        assert "run `pfar init`" in said(r), said(r)
        assert str(empty / "vault" / "sessions.db") in said(r)
        assert "Traceback" not in said(r)
    assert not (empty / "vault").exists()  # nothing was created in its place


def test_init_twice_refuses_and_leaves_the_vault_byte_identical(tmp_path: Path) -> None:
    root = tmp_path / "home"
    first = pfar(root, "init")
    assert first.returncode == 0, said(first)
    # some real content, so that "identical" means something
    home = Home(root)
    (home.templates_dir / "note.toml").write_text(
        (home.templates_dir / "note.toml").read_text() + "# mine\n"
    )
    home.config.write_text(home.config.read_text() + "# edited by me\n")
    before = digest(root)
    assert {"vault/sessions.db", "vault/secrets.db", "vault/memory.db"} <= set(before)

    again = pfar(root, "init")
    assert again.returncode == 1
    assert f"{root} already has a vault" in said(again)
    assert "nothing was changed" in said(again)
    assert digest(root) == before

    # a vault with one database missing is still a vault: not re-initialised over
    (root / "vault" / "sessions.db").unlink()
    before = digest(root)
    partial = pfar(root, "init")
    assert partial.returncode == 1
    assert "already has a vault" in said(partial)
    assert digest(root) == before


@pytest.mark.parametrize("db_name", ["sessions.db", "secrets.db", "memory.db"])
def test_corrupt_database_is_named_and_left_untouched(tmp_path: Path, db_name: str) -> None:
    home = make_home(tmp_path / "home")
    target = home.vault_dir / db_name
    garbage = bytes(range(256)) * 16
    target.write_bytes(garbage)
    listing = sorted(p.name for p in home.vault_dir.iterdir())

    r = pfar(home, "run", "--no-stdin")
    assert r.returncode == 1, said(r)
    assert f"{target}: not a readable pfar database" in said(r)
    assert "left untouched" in said(r)
    assert target.read_bytes() == garbage
    # no -wal, no -shm: only the start-up check's own record of what it found
    assert sorted(p.name for p in home.vault_dir.iterdir()) == sorted([*listing, "last-check.json"])
    if db_name == "sessions.db":
        for args in (("tasks",), ("task", "show", "abcd"), ("recover", "--dry-run")):
            r = pfar(home, *args)
            assert r.returncode == 1 and str(target) in said(r), (args, said(r))
        assert target.read_bytes() == garbage


def test_a_sqlite_header_with_garbage_after_it_is_refused(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    data = b"SQLite format 3\x00" + b"\xff" * 200
    home.sessions_db.write_bytes(data)
    r = pfar(home, "run", "--no-stdin")
    assert r.returncode == 1
    assert str(home.sessions_db) in said(r)
    assert home.sessions_db.read_bytes() == data


def test_an_emptied_sessions_db_is_refused_not_reinitialised(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    home.sessions_db.write_bytes(b"")  # e.g. truncated by a broken restore
    k = KernelProcess(home)
    try:
        code = k.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if k.proc.poll() is None:
            k.terminate()
    assert code == 1
    assert home.sessions_db.read_bytes() == b""


def test_a_foreign_sqlite_database_is_refused_not_migrated_into(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    home.sessions_db.unlink()
    with vault_db(home) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, data BLOB)")
        conn.execute("INSERT INTO photos (data) VALUES (x'00ff')")
    conn.close()
    before = home.sessions_db.read_bytes()
    for args in (("recover", "--dry-run"), ("tasks",)):  # read-only commands
        r = pfar(home, *args)
        assert r.returncode == 1
        assert "Traceback" not in said(r), said(r)  # today: "no such table: task_journal"
        assert str(home.sessions_db) in said(r)
    k = KernelProcess(home)
    try:
        code = k.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if k.proc.poll() is None:
            k.terminate()
    assert code == 1
    assert home.sessions_db.read_bytes() == before


# -- config.toml ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[recovery\nmax_task_age_seconds = 3\n", "not valid TOML"),
        ("[recovery]\nmax_task_age_seconds = -1\n", "recovery.max_task_age_seconds:"),
        ('[recovery]\nmax_task_age_seconds = "ten"\n', "recovery.max_task_age_seconds:"),
        ("[approvals]\ncredential_prompt_timeout_seconds = 0\n", "approvals.credential_prompt"),
        ('[vault]\nsynchronous = "OFF"\n', "vault.synchronous:"),
        ("[recovery]\nmax_task_age_secs = 5\n", "recovery.max_task_age_secs: unknown key"),
        ("[recoverie]\nmax_task_age_seconds = 5\n", "recoverie: unknown key"),
    ],
    ids=["bad-toml", "negative", "wrong-type", "zero-timeout", "bad-enum", "typo", "bad-section"],
)
def test_bad_config_is_refused_with_file_and_key(tmp_path: Path, body: str, expected: str) -> None:
    home = make_home(tmp_path / "home")
    home.config.write_text(body)
    before = digest(home.root)

    for args in (("run", "--no-stdin"), ("recover", "--dry-run")):
        r = pfar(home, *args)
        assert r.returncode == 1, (args, said(r))
        assert f"{home.config}: " in said(r), said(r)
        assert expected in said(r), said(r)
        assert "Traceback" not in said(r)
    # refused before touching anything: not even the lock file
    assert digest(home.root) == before
    assert not home.lock_file.exists()


def test_negative_max_age_message_in_full(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", config="[recovery]\nmax_task_age_seconds = -1\n")
    r = pfar(home, "run", "--no-stdin")
    assert said(r) == (
        f"error: {home.config}: recovery.max_task_age_seconds: Input should be greater than 0"
    )


# -- templates -----------------------------------------------------------------------

CMD_TEMPLATE = """
    id = "cmd"
    description = "Run a shell command"
    allowed_tools = ["shell.run"]
    [timeouts]
    step_seconds = 1
"""

CMD_SCRIPT = """
    [[responses]]
    template = "cmd"
    phase = "plan"
    json = { steps = [ { tool = "shell.run", args = { argv = ["sh", "-c", "$input"] } } ] }

    [[responses]]
    template = "cmd"
    phase = "synthesize"
    text = "ran: $step0"
"""


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            'id = "bad"\nallowed_tools = "shell.run"\n',
            "allowed_tools: Input should be a valid list",
        ),
        ('id = "bad"\n', "allowed_tools: Field required"),
        ('id = "bad"\nallowed_tools = []\ncolour = "red"\n', "colour: unknown key"),
        ('id = "other"\nallowed_tools = []\n', "id: must match the file name ('bad')"),
        ('id = "bad"\nallowed_tools = []\n[timeouts]\nstep_seconds = 0\n', "timeouts.step_seconds"),
        ('id = "bad"\nallowed_tools = []\noutput_sinks = ["email"]\n', "output_sinks"),
        ('id = "bad"\nallowed_tools = [\n', "not valid TOML"),
    ],
    ids=["wrong-type", "missing", "unknown-key", "id-mismatch", "zero", "bad-sink", "bad-toml"],
)
def test_submit_to_a_malformed_template_names_file_and_field(
    tmp_path: Path, body: str, field: str
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    path = home.templates_dir / "bad.toml"
    path.write_text(body)
    with running_kernel(home) as k:
        r = pfar(home, "submit", "bad", "hello")
        assert r.returncode == 1, said(r)
        assert f"{path}: " in said(r), said(r)
        assert field in said(r), said(r)
        # the kernel is fine, and nothing was stored for the refused submit
        assert task_states(home) == {}
        ok = pfar(home, "submit", "cmd", "true", "--wait", "--json")
        assert ok.returncode == 0, said(ok)
        assert k.proc.poll() is None
    assert path.read_text() == body
    # the kernel said so at startup too
    assert "template not loaded" in " ".join(k.stdout_path.read_text().split())


def test_submit_to_an_unknown_template_names_the_file_it_looked_for(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home):
        r = pfar(home, "submit", "nosuch", "hello")
    assert r.returncode == 1
    assert f"{home.templates_dir / 'nosuch.toml'}: no such template (known: cmd)" in said(r)
    assert task_states(home) == {}


# -- unknown ids ------------------------------------------------------------------------


def test_unknown_task_id_in_task_show(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    for tid in ("nope", "0123456789abcdef"):
        r = pfar(home, "task", "show", tid)
        assert r.returncode == 1
        assert said(r) == f"error: no task with id '{tid}'; `pfar tasks` lists them"


def test_unknown_approval_id_in_approve(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home) as k:
        for verb in ("approve", "deny"):
            r = pfar(home, verb, "zzzzzzzz")
            assert r.returncode == 1
            assert "no approval with id 'zzzzzzzz'" in said(r), said(r)
            assert "`pfar approvals` lists them" in said(r)
        r = pfar(home, "credential", "qqqqqqqq", stdin="s3cret\n")
        assert r.returncode == 1
        assert "no credential prompt with id 'qqqqqqqq'" in said(r), said(r)
        assert k.proc.poll() is None


# -- answering the owner's questions ------------------------------------------------


def _pending_approval(home: Home) -> str:
    def find() -> str | None:
        with db(home) as conn:
            row = conn.execute(
                "SELECT approval_id FROM pending_approvals WHERE status = 'pending'"
            ).fetchone()
        return None if row is None else str(row[0])

    return str(wait_for(find, what="a pending approval"))


def test_approving_twice_has_one_effect(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)  # run_command needs approval
    effects = tmp_path / "effects.log"
    with running_kernel(home):
        sub = pfar(home, "submit", "run_command", f"echo ran >> {effects}", "--json")
        assert sub.returncode == 0, said(sub)
        approval_id = _pending_approval(home)
        short = approval_id[:8]

        first = pfar(home, "approve", short)
        assert first.returncode == 0, said(first)
        assert f"approval {approval_id}: approved; task" in said(first)
        second = pfar(home, "approve", short)
        assert second.returncode == 0, said(second)
        assert f"approval {approval_id} was already approved; nothing changed" in said(second)
        wait_for(lambda: set(task_states(home).values()) <= TERMINAL, what="the task to end")
        third = pfar(home, "deny", short)
        assert third.returncode == 1
        assert f"approval {approval_id} is already approved (approve)" in said(third)
        assert "nothing was changed" in said(third)

    assert effects.read_text() == "ran\n"
    assert list(task_states(home).values()) == ["Completed"]
    with db(home) as conn:
        row = conn.execute("SELECT status, decision FROM pending_approvals").fetchone()
    assert tuple(row) == ("approved", "approve")


def test_a_credential_for_an_expired_prompt_is_refused(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        templates={
            "cred": """
                id = "cred"
                allowed_tools = ["admin.prompt_credential"]
            """
        },
        script="""
            [[responses]]
            template = "cred"
            phase = "plan"
            [responses.json]
            steps = [{ tool = "admin.prompt_credential", args = { service = "notion" } }]
        """,
        config="[approvals]\ncredential_prompt_timeout_seconds = 0.5\n",
    )
    with running_kernel(home) as k:
        r = pfar(home, "submit", "cred", "connect notion")
        assert r.returncode == 0, said(r)

        def prompt() -> str | None:
            with db(home) as conn:
                row = conn.execute("SELECT prompt_id FROM pending_credentials").fetchone()
            return None if row is None else str(row[0])

        prompt_id = str(wait_for(prompt, what="the credential prompt"))
        wait_for(lambda: "Failed" in task_states(home).values(), what="the prompt to expire")
        r = pfar(home, "credential", prompt_id[:8], stdin="s3cret-value\n")
        assert r.returncode == 1
        assert f"credential prompt {prompt_id} is already expired" in said(r), said(r)
        assert "nothing was changed" in said(r)
        assert k.proc.poll() is None

    ((_tid, state),) = task_states(home).items()
    assert state == "Failed"
    with db(home) as conn:
        error = conn.execute("SELECT error FROM task_journal").fetchone()[0]
        status = conn.execute("SELECT status FROM pending_credentials").fetchone()[0]
    assert error == "credential prompt timeout"
    assert status == "expired"
    with vault_db(home, home.secrets_db) as conn:
        assert conn.execute("SELECT count(*) FROM secrets").fetchone()[0] == 0
    for f in home.root.rglob("*"):
        if f.is_file():
            assert b"s3cret-value" not in f.read_bytes(), f


# -- one kernel per home ------------------------------------------------------------


def test_a_second_kernel_on_the_same_home_is_refused(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home) as k:
        boot = k.request("ping")["boot_id"]
        r = pfar(home, "run", "--no-stdin", timeout=30)
        assert r.returncode == 1, said(r)
        assert f"{home.root} is owned by a running kernel (pid {k.proc.pid})" in said(r)
        # the first kernel did not notice: same boot, its socket still answers, work goes on
        assert k.request("ping")["boot_id"] == boot
        ok = pfar(home, "submit", "cmd", "echo fine", "--wait", "--json")
        assert ok.returncode == 0, said(ok)
        assert list(task_states(home).values()) == ["Completed"]
        with db(home) as conn:
            boots = conn.execute("SELECT count(*) FROM kernel_boots").fetchone()[0]
        assert boots == 1  # the refused kernel journaled nothing


def test_submit_without_a_kernel_exits_2(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    before = digest(home.root)
    r = pfar(home, "submit", "note", "hello")
    assert r.returncode == 2
    assert said(r) == f"error: no kernel is running on {home.root}; start one with `pfar run`"
    assert digest(home.root) == before
    for args in (("approve", "abcd1234"), ("credential", "abcd1234")):
        r = pfar(home, *args, stdin="x\n")
        assert r.returncode == 2, (args, said(r))
        assert "start one with `pfar run`" in said(r)


def test_cancel_pause_resume_without_a_kernel_exit_2(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    before = digest(home.root)
    for verb in ("cancel", "pause", "resume"):
        r = pfar(home, verb, "abcd1234")
        assert r.returncode == 2, (verb, said(r))
        assert said(r) == f"error: no kernel is running on {home.root}; start one with `pfar run`"
    assert digest(home.root) == before


# -- the owner's hold on a task: cancel, pause, resume --------------------------------


def test_cancel_pause_resume_name_an_unknown_or_too_short_id(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home) as k:
        for verb in ("cancel", "pause", "resume"):
            r = pfar(home, verb, "zzzzzzzz")
            assert r.returncode == 1, (verb, said(r))
            assert said(r) == "error: no task with id 'zzzzzzzz'; `pfar tasks` lists them"
            r = pfar(home, verb, "ab")
            assert r.returncode == 1, (verb, said(r))
            assert said(r) == (
                "error: id prefix 'ab' is too short: give at least 4 characters (or the whole id)"
            )
        assert k.proc.poll() is None


def test_an_ended_task_cannot_be_cancelled_paused_or_resumed(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home):
        task_id, state, _ = _submit_and_wait(home, "true")
        assert state == "Completed"
        before = _task_row(home, task_id)
        for verb, action in (("cancel", "cancelled"), ("pause", "paused"), ("resume", "resumed")):
            r = pfar(home, verb, task_id[:8])
            assert r.returncode == 1, (verb, said(r))
            assert said(r) == (
                f"error: task {task_id} is Completed: it has already ended, so it cannot be "
                f"{action}; nothing was changed"
            )
        assert dict(_task_row(home, task_id)) == dict(before)


# -- tools that fail -----------------------------------------------------------------


def _task_row(home: Home, task_id: str) -> sqlite.Row:
    with db(home) as conn:
        return conn.execute(
            "SELECT state, error FROM task_journal WHERE task_id = ?", (task_id,)
        ).fetchone()


def _submit_and_wait(home: Home, text: str) -> tuple[str, str, str | None]:
    r = pfar(home, "submit", "cmd", text, "--json")
    assert r.returncode == 0, said(r)
    task_id = json.loads(r.stdout)["task_id"]

    def ended() -> sqlite.Row | None:
        row = _task_row(home, task_id)
        return row if row["state"] in TERMINAL else None

    row = wait_for(ended, what="the task to end")
    return task_id, row["state"], row["error"]


def test_a_tool_that_fails_fails_its_task_and_nothing_else(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home) as k:
        tid, state, error = _submit_and_wait(home, "echo boom-on-stderr >&2; exit 1")
        assert state == "Failed"
        assert error is not None
        assert "step 1 of 1" in error and "shell.run" in error
        assert "exited with 1" in error and "boom-on-stderr" in error
        with db(home) as conn:
            step = conn.execute(
                "SELECT status, error FROM task_steps WHERE task_id = ?", (tid,)
            ).fetchone()
        assert step["status"] == "failed" and "exited with 1" in step["error"]
        # the owner was told
        wait_for(
            lambda: any(
                '"kind": "notice"' in line and tid in line and "exited with 1" in line
                for line in home.owner_log.read_text().splitlines()
            ),
            what="the failure notice",
        )
        # the kernel keeps running and takes new work
        _, state2, _ = _submit_and_wait(home, "echo fine")
        assert state2 == "Completed"
        assert k.proc.poll() is None
        show = pfar(home, "task", "show", tid)
        assert show.returncode == 0
        assert "Failed" in said(show) and "exited with 1" in said(show)


def test_a_tool_that_hangs_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    pids = tmp_path / "pids"
    # the shell, and a grandchild in the background: both must be gone after the timeout
    cmd = f"sleep 30 & echo $! >> {pids}; echo $$ >> {pids}; wait"
    with running_kernel(home) as k:
        started = time.monotonic()
        _, state, error = _submit_and_wait(home, cmd)
        took = time.monotonic() - started
        assert state == "Failed"
        assert error is not None and "did not finish within 1s" in error, error
        assert "step 1 of 1" in error
        # well under the 30 s sleep it was cut from, with room for a slow `pfar submit`
        assert took < 25
        pid_list = [int(p) for p in pids.read_text().split()]
        assert len(pid_list) == 2
        wait_for(lambda: not any(_alive(p) for p in pid_list), 5, "the sleep to be killed")
        # the kernel keeps running
        _, state2, _ = _submit_and_wait(home, "echo fine")
        assert state2 == "Completed"
        assert k.proc.poll() is None


# -- event ids ---------------------------------------------------------------------------


def test_an_event_id_reused_for_another_event_is_refused_naming_its_task(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    (home.templates_dir / "other.toml").write_text('id = "other"\nallowed_tools = []\n')
    with running_kernel(home) as k:
        first = pfar(home, "submit", "cmd", "echo one", "--event-id", "mail-1", "--json")
        assert first.returncode == 0, said(first)
        task_id = json.loads(first.stdout)["task_id"]
        # redelivered: the same template and text is the same event (exactly once)
        again = pfar(home, "submit", "cmd", "echo one", "--event-id", "mail-1", "--json")
        assert again.returncode == 0, said(again)
        assert json.loads(again.stdout)["task_id"] == task_id

        other_text = pfar(home, "submit", "cmd", "echo two", "--event-id", "mail-1")
        assert other_text.returncode == 1, said(other_text)
        assert (
            f"event id 'mail-1' was already used by task {task_id} (a different text); "
            "nothing was created" in said(other_text)
        ), said(other_text)
        other_tpl = pfar(home, "submit", "other", "echo one", "--event-id", "mail-1")
        assert other_tpl.returncode == 1, said(other_tpl)
        assert (
            f"event id 'mail-1' was already used by task {task_id} "
            "(template 'cmd', not 'other')" in said(other_tpl)
        ), said(other_tpl)
        assert k.proc.poll() is None
    assert list(task_states(home)) == [task_id]
    with db(home) as conn:
        text = conn.execute("SELECT json_extract(trigger_event, '$.text') FROM task_journal")
        assert text.fetchone()[0] == "echo one"


def test_a_redelivered_event_is_the_same_after_a_secret_in_its_text_was_stored(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    text = "echo hunter2-pass"
    with running_kernel(home):
        first = pfar(home, "submit", "cmd", text, "--event-id", "e-7", "--json")
        assert first.returncode == 0, said(first)
        stored = pfar(home, "secret", "set", "pw", stdin="hunter2-pass")
        assert stored.returncode == 0, said(stored)
        # the journal holds the text as redacted then; the redelivery is redacted now
        again = pfar(home, "submit", "cmd", text, "--event-id", "e-7", "--json")
        assert again.returncode == 0, said(again)
        assert json.loads(again.stdout)["task_id"] == json.loads(first.stdout)["task_id"]
    assert len(task_states(home)) == 1


@pytest.mark.parametrize(
    ("event_id", "problem"),
    [
        ([1, 2], "event_id: must be a string, not list"),
        ({"a": 1}, "event_id: must be a string, not dict"),
        (True, "event_id: must be a string, not bool"),
        (1, "event_id: must be a string, not int"),
        ("", "event_id: must be 1 to 256 characters"),
        ("x" * 257, "event_id: must be 1 to 256 characters"),
        ("a\nb", "event_id: must not contain control characters"),
    ],
    ids=["list", "object", "true", "int", "empty", "too-long", "newline"],
)
def test_event_ids_on_the_control_socket_are_checked(
    tmp_path: Path, event_id: object, problem: str
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    with running_kernel(home) as k:
        ok = k.request("submit", template="cmd", text="echo a", event_id="1")
        with pytest.raises(RemoteError) as bad:
            k.request("submit", template="cmd", text="echo a", event_id=event_id)
        assert bad.value.remote_code == "bad_request", bad.value
        assert problem in str(bad.value)
        # `true` is not the event "1" (or "True") seen again
        assert k.request("ping")
    assert list(task_states(home)) == [ok["task_id"]]


# -- the scripted model's patterns -----------------------------------------------------------

SLOW_TEMPLATE = """
    id = "slow"
    description = "Match a pattern"
    allowed_tools = ["shell.run"]
"""


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        # what froze the kernel with `re`; `regex` answers it at once: no plan matches
        ("(a+)+$", "has no plan for template 'slow'"),
        # catastrophic for any backtracking matcher: stopped at the match timeout
        ("(a|aa)+$", "responses.0.match: the pattern '(a|aa)+$' took more than 1s"),
    ],
    ids=["nested-plus", "alternation"],
)
def test_a_catastrophic_match_pattern_never_stalls_the_kernel(
    tmp_path: Path, pattern: str, problem: str
) -> None:
    script = f"""
        [[responses]]
        template = "slow"
        phase = "plan"
        match = '{pattern}'
        json = {{ steps = [ {{ tool = "shell.run", args = {{ argv = ["true"] }} }} ] }}
    """
    home = make_home(
        tmp_path / "home",
        templates={"slow": SLOW_TEMPLATE, "cmd": CMD_TEMPLATE},
        script=script + CMD_SCRIPT,
    )
    k = KernelProcess(home)
    try:
        k.wait_ready()
        slow = pfar(home, "submit", "slow", "a" * 40 + "b", "--json")
        assert slow.returncode == 0, said(slow)
        task_id = json.loads(slow.stdout)["task_id"]
        # the control socket answers while the pattern runs, and other tasks go on
        assert call(home, {"op": "ping"}, timeout=30)["boot_id"]
        ok = pfar(home, "submit", "cmd", "echo fine", "--json")
        assert ok.returncode == 0, said(ok)
        row = wait_for(
            lambda: (r := _task_row(home, task_id))["state"] in TERMINAL and r,
            what="the task with the slow pattern to end",
        )
        assert row["state"] == "Failed"
        assert str(home.root / "scripts" / "default.toml") in row["error"], row["error"]
        assert problem in row["error"], row["error"]
        wait_for(lambda: set(task_states(home).values()) <= TERMINAL, what="the other task")
        assert task_states(home)[json.loads(ok.stdout)["task_id"]] == "Completed"
        assert k.terminate() == 0
    finally:
        if k.proc.poll() is None:
            k.kill()


# -- templates, checked whole at load ---------------------------------------------------------

WHOLE_BAD_TEMPLATE = """
    id = "bad"
    allowed_tools = ["rm.everything", "shell.run"]
    output_sinks = ["owner", "workspace:../../x", "workspace:/etc/hostname"]
    priority = "high"
    [approval]
    require = ["shel.run"]
    on_deny = "maybe"
    [timeouts]
    step_seconds = "soon"
"""

KNOWN_TOOLS = ", ".join(sorted(t.name for t in ToolRegistry.builtin()))
WHOLE_BAD_PROBLEMS = [
    f"allowed_tools.0: unknown tool 'rm.everything' (known: {KNOWN_TOOLS})",
    "output_sinks.1: 'workspace:../../x': '../../x' leads outside the task workspace",
    "output_sinks.2: 'workspace:/etc/hostname': '/etc/hostname' is an absolute path",
    "priority: Input should be a valid integer",
    f"approval.require.0: unknown tool 'shel.run' (known: {KNOWN_TOOLS})",
    "approval.on_deny: Input should be 'skip' or 'fail'",
    "timeouts.step_seconds: Input should be a valid number",
]


def test_a_template_is_checked_whole_at_load_and_every_problem_is_named(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        templates={"cmd": CMD_TEMPLATE, "bad": WHOLE_BAD_TEMPLATE},
        script=CMD_SCRIPT,
    )
    path = home.templates_dir / "bad.toml"
    body = path.read_text()
    with running_kernel(home) as k:
        r = pfar(home, "submit", "bad", "echo hello")
        assert r.returncode == 1, said(r)
        for problem in WHOLE_BAD_PROBLEMS:
            assert f"{path}: {problem}" in said(r), (problem, said(r))
        assert task_states(home) == {}
        assert k.proc.poll() is None
    # at start, one line for each problem, each with the file and its key
    started = k.stdout_path.read_text().splitlines()
    for problem in WHOLE_BAD_PROBLEMS:
        assert any(
            line.startswith(f"template not loaded: {path}: {problem}") for line in started
        ), (problem, started)
    assert path.read_text() == body
    assert not (home.root.parent / "x").exists()


@pytest.mark.parametrize(
    ("sink", "problem"),
    [
        ("workspace:../../escaped.txt", "leads outside the task workspace (through '..')"),
        ("workspace:/tmp/escaped.txt", "is an absolute path"),
        ("workspace:", "is empty"),
    ],
    ids=["dotdot", "absolute", "empty"],
)
def test_a_workspace_sink_outside_the_workspace_is_refused_before_any_write(
    tmp_path: Path, sink: str, problem: str
) -> None:
    effects = tmp_path / "effects.log"
    template = (
        'id = "cmd"\nallowed_tools = ["shell.run"]\n'
        f'output_sinks = ["{sink}"]\n[timeouts]\nstep_seconds = 5\n'
    )
    home = make_home(tmp_path / "home", templates={"cmd": template}, script=CMD_SCRIPT)
    with running_kernel(home):
        r = pfar(home, "submit", "cmd", f"echo ran >> {effects}")
        assert r.returncode == 1, said(r)
        assert f"{home.templates_dir / 'cmd.toml'}: output_sinks.0: {sink!r}: " in said(r)
        assert problem in said(r), said(r)
    assert task_states(home) == {}
    assert not effects.exists()  # refused at load: the task's write never ran


# -- workflows: files outside the workflow directory ------------------------------------------


@pytest.mark.parametrize(
    ("line", "key", "problem"),
    [
        (
            'artifacts = ["../../../../etc/passwd"]',
            "steps.0.artifacts.0",
            "'../../../../etc/passwd' leads outside the workflow directory (through '..')",
        ),
        (
            'artifacts = ["notes.md", "/etc/hostname"]',
            "steps.0.artifacts.1",
            "'/etc/hostname' is an absolute path: give it relative to the workflow directory",
        ),
    ],
    ids=["dotdot", "absolute"],
)
def test_a_workflow_artifact_outside_its_directory_is_refused_at_load(
    tmp_path: Path, line: str, key: str, problem: str
) -> None:
    home = make_home(tmp_path / "home", script="")
    work = tmp_path / "work"
    work.mkdir()
    definition = tmp_path / "wf.toml"
    definition.write_text(
        f'name = "wf"\n[[steps]]\nname = "one"\nrun = ["touch", "ran.txt"]\n{line}\n'
    )
    with running_kernel(home):
        r = pfar(home, "workflow", "start", str(definition), str(work))
        assert r.returncode == 1, said(r)
        assert f"error: {definition}: {key}: {problem}" in said(r), said(r)
    assert task_states(home) == {}
    assert sorted(p.name for p in work.iterdir()) == []  # nothing ran, no trace written


def test_a_workflow_artifact_that_is_a_symlink_leading_out_is_not_taken_as_made(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", script="")
    work = tmp_path / "work"
    work.mkdir()
    definition = tmp_path / "wf.toml"
    definition.write_text(
        'name = "wf"\n[[steps]]\nname = "one"\n'
        'run = ["ln", "-s", "/etc/hostname", "out.txt"]\nartifacts = ["out.txt"]\n'
    )
    with running_kernel(home):
        r = pfar(home, "workflow", "start", str(definition), str(work))
        assert r.returncode == 0, said(r)
        task_id = r.stdout.split()[2]

        def asked() -> sqlite.Row | None:
            with db(home) as conn:
                return conn.execute(
                    "SELECT description FROM pending_approvals WHERE task_id = ?", (task_id,)
                ).fetchone()

        question = wait_for(asked, what="the owner to be asked about the failed step")
        assert "expected artifacts missing: out.txt" in question["description"]
    with db(home) as conn:
        step = conn.execute("SELECT status FROM task_steps WHERE task_id = ?", (task_id,))
        assert step.fetchone()["status"] == "failed"
    # a trace edited by hand to name it: the status says where it points, never "ok"
    trace = (work / "trace.md").read_text()
    (work / "trace.md").write_text(
        trace.replace("**Status:** failed", "**Status:** completed\n**Artifacts:** out.txt")
    )
    status = pfar(home, "workflow", "status", str(work))
    assert "artifact out.txt: OUTSIDE the workflow directory (not checked)" in said(status)
    assert "out.txt: ok" not in said(status)


# -- sessions ---------------------------------------------------------------------------------


def test_a_session_for_a_project_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script="")
    missing = tmp_path / "nonexistent"
    with running_kernel(home) as k:
        r = pfar(home, "session", "new", str(missing), "chat-1")
        assert r.returncode != 0, said(r)
        assert str(missing) in said(r) and "does not exist" in said(r), said(r)
        # the control socket checks it too: the CLI is not the only client
        with pytest.raises(RemoteError) as bad:
            k.request("session_new", project_path=str(missing), thread_id="chat-1")
        assert bad.value.remote_code == "bad_request"
        assert str(bad.value) == (f"project_path: {missing} does not exist; nothing was created"), (
            bad.value
        )
        with pytest.raises(RemoteError) as relative:
            k.request("session_new", project_path="proj", thread_id="chat-1")
        assert "project_path: 'proj' is not an absolute path" in str(relative.value)
    r = pfar(home, "session", "list", "--json")
    assert json.loads(r.stdout) == []


def test_a_thread_id_with_shell_syntax_is_refused_and_never_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = make_home(
        tmp_path / "home",
        script="",
        config="""
            [sessions]
            agent_command = ["sh", "-c", "echo {thread_id} > args.txt; exec sleep 30"]
        """,
    )
    with running_kernel(home):
        r = pfar(home, "session", "new", str(project), "chat-3;touch pwned")
        assert r.returncode == 1, said(r)
        assert "thread_id: 'chat-3;touch pwned' is not a thread id" in said(r), said(r)
        assert json.loads(pfar(home, "session", "list", "--json").stdout) == []

    # a row stored before thread ids were checked: kept as it is, and still never run
    with db(home) as conn:
        conn.execute(
            "INSERT INTO sessions (session_id, project_path, thread_id, status, context, "
            "created_at, updated_at) VALUES ('old-1', ?, 'chat-3;touch pwned', 'CREATED', "
            "'{}', '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z')",
            (str(project),),
        )
    with running_kernel(home):
        r = pfar(home, "session", "resume", "old-1")
        assert r.returncode == 0, said(r)
        args = project / "args.txt"
        wait_for(lambda: args.exists() and args.read_text(), what="the agent's output")
        assert args.read_text() == "chat-3;touch pwned\n"
        assert not (project / "pwned").exists()
        r = pfar(home, "session", "terminate", "old-1")
        assert r.returncode == 0, said(r)
    assert not (project / "pwned").exists()
    with db(home) as conn:
        thread = conn.execute("SELECT thread_id FROM sessions WHERE session_id = 'old-1'")
        assert thread.fetchone()[0] == "chat-3;touch pwned"
