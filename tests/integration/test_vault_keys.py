"""The vault's key through the real CLI on real files: each way of not having the right
key is told apart by its message, stops `pfar run` before recovery, and changes no
vault file; the keychain path works with keyring's file backend; and the key reaches
no argv, no log, no environment of what the kernel starts, and no sandbox."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pfar.cli.client import call
from pfar.tools import sandbox
from pfar.vault.home import Home

from ..support import make_home, pfar, said, wait_for
from ..vault_support import file_states, key_file_of, ok, pfar_env, unlock_json

pytestmark = pytest.mark.crash  # kernels run as subprocesses

PASSPHRASE = "correct horse battery staple " + uuid.uuid4().hex


def _run_refused(
    home: Home, env: dict[str, str] | None = None, fds: dict[str, str] | None = None
) -> str:
    """`pfar run` on a vault it cannot open: it exits non-zero before recovery (no audit
    log, no owner log, not a byte of the vault changed); what it said."""
    before = file_states(home)
    r = pfar_env(home, "run", "--no-stdin", env=env, fds=fds, timeout=60)
    assert r.returncode != 0, said(r)
    assert "to recover" not in said(r) and "recovered" not in said(r)
    assert "kernel running" not in said(r)
    assert file_states(home) == before
    assert not home.audit_log.exists() and not home.owner_log.exists()
    # a read command says the same, and changes nothing either
    read = pfar_env(home, "tasks", env=env, fds=fds)
    assert read.returncode == 1
    assert file_states(home) == before
    return said(r)


# what each failure says, and no other: they are told apart by these
MESSAGES = {
    "wrong": "is not this vault's key",
    "missing": "does not exist. Put the key file back",
    "mode": "is readable by others (mode 644); refused. Fix it with `chmod 600",
    "keychain": "the vault's key is not in the OS keychain",
    "passphrase wrong": "is not this vault's key",
    "no terminal": "the vault's key is a passphrase, and there is no terminal to ask for it",
    "damaged": "which is the right one (its check value matches): the file is damaged",
}


def _only(said_text: str, case: str) -> None:
    assert MESSAGES[case] in said_text, said_text
    for other, message in MESSAGES.items():
        if message != MESSAGES[case]:
            assert message not in said_text, (case, other, said_text)


def test_a_wrong_key_a_missing_one_and_one_others_can_read_are_told_apart(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    key = key_file_of(home)
    good = key.read_text()
    key.write_text(secrets.token_hex(32) + "\n")  # a valid key, another vault's
    said_wrong = _run_refused(home)
    _only(said_wrong, "wrong")
    assert "The vault files were not touched and are not damaged for it" in said_wrong
    key.unlink()
    _only(_run_refused(home), "missing")
    key.write_text(good)
    key.chmod(0o644)
    _only(_run_refused(home), "mode")
    key.chmod(0o600)
    with_key = pfar(home, "tasks", "--json")
    assert with_key.returncode == 0, said(with_key)  # put right, it opens


def test_a_damaged_file_with_the_right_key_is_called_damaged(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    with open(home.sessions_db, "r+b") as f:  # page 1, past the salt: its HMAC fails
        f.seek(200)
        f.write(bytes(b ^ 0xFF for b in f.read(16)))
    said_damaged = _run_refused(home)
    _only(said_damaged, "damaged")
    assert str(home.sessions_db) in said_damaged and "its check value matches" in said_damaged


def test_a_passphrase_on_a_descriptor_right_wrong_and_absent(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    r = pfar_env(home, "init", "--passphrase", fds={"PFAR_PASSPHRASE_FD": PASSPHRASE + "\n"})
    assert r.returncode == 0, said(r)
    assert unlock_json(home)["key"]["kind"] == "passphrase"
    _only(_run_refused(home, fds={"PFAR_PASSPHRASE_FD": "not it\n"}), "passphrase wrong")
    assert "type the passphrase again" in _run_refused(home, fds={"PFAR_PASSPHRASE_FD": "x\n"})
    # no descriptor, no terminal (the command has none: a new session)
    _only(_run_refused(home), "no terminal")
    right = pfar_env(home, "tasks", "--json", fds={"PFAR_PASSPHRASE_FD": PASSPHRASE + "\n"})
    assert right.returncode == 0 and json.loads(right.stdout) == []


# -- the OS keychain, through keyring's plain-file backend (keyrings.alt) --------------


@pytest.fixture
def keychain(tmp_path: Path) -> dict[str, str]:
    """The environment of a pfar whose keychain is keyrings.alt's PlaintextKeyring, in
    a data directory of this test's own (never the keychain of whoever runs it)."""
    return {
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }


def _keyring_file(tmp_path: Path) -> Path:
    return tmp_path / "data" / "python_keyring" / "keyring_pass.cfg"


@pytest.mark.parametrize("flag", [["--keychain"], []], ids=["--keychain", "auto"])
def test_init_keeps_the_key_in_the_keychain(
    tmp_path: Path, keychain: dict[str, str], flag: list[str]
) -> None:
    home = Home(tmp_path / "home")
    key_dir = Path(os.environ["PFAR_KEY_DIR"])
    key_files = sorted(key_dir.iterdir())
    r = pfar_env(home, "init", *flag, env=keychain)
    assert r.returncode == 0, said(r)
    info = unlock_json(home)
    assert info["key"] == {"kind": "keychain", "service": "pfar", "account": info["vault_id"]}
    assert "its key is in the OS keychain (service 'pfar', account" in r.stdout
    assert "key file" not in said(r)  # no fallback said: there is a keychain
    assert sorted(key_dir.iterdir()) == key_files  # and no key file was made
    # keyrings.alt keeps it in its file under XDG_DATA_HOME: the test's own
    assert info["vault_id"] in _keyring_file(tmp_path).read_text()
    listed = pfar_env(home, "tasks", "--json", env=keychain)
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    status = pfar_env(home, "vault", "status", env=keychain)
    assert "key source: the OS keychain" in said(status) and "key: available" in said(status)


def test_a_keychain_without_the_entry_is_a_missing_key(
    tmp_path: Path, keychain: dict[str, str]
) -> None:
    home = Home(tmp_path / "home")
    ok(pfar_env(home, "init", "--keychain", env=keychain))
    account = unlock_json(home)["vault_id"]
    subprocess.run(
        [sys.executable, "-c", f"import keyring; keyring.delete_password('pfar', {account!r})"],
        env={**os.environ, **keychain},
        check=True,
    )
    said_missing = _run_refused(home, env=keychain)
    _only(said_missing, "keychain")
    assert "pfar vault key import FILE" in said_missing
    status = pfar_env(home, "vault", "status", env=keychain)
    assert status.returncode == 0 and "key: not available (the vault's key is not in" in said(
        status
    )


def test_rekey_into_the_keychain_and_out_of_it(tmp_path: Path, keychain: dict[str, str]) -> None:
    home = make_home(tmp_path / "home")
    old = key_file_of(home)
    r = pfar_env(home, "vault", "rekey", "--keychain", env=keychain)
    assert r.returncode == 0, said(r)
    info = unlock_json(home)
    assert info["key"]["kind"] == "keychain" and info["key"]["account"] != info["vault_id"]
    assert not old.exists()
    ok(pfar_env(home, "tasks", "--json", env=keychain))
    back = pfar_env(
        home, "vault", "rekey", "--key-file", str(tmp_path / "k" / "v.key"), env=keychain
    )
    assert back.returncode == 0, said(back)
    assert "the old key was removed from the OS keychain" in said(back)
    assert info["key"]["account"] not in _keyring_file(tmp_path).read_text()


# -- where the key never goes ------------------------------------------------------------

PROBE = textwrap.dedent(
    """
    import glob, json, os, sys
    key_file, key_dirs = sys.argv[1], sys.argv[2:]
    seen = {"env": dict(os.environ), "environ": open("/proc/self/environ", "rb").read().decode()}
    seen["ps"] = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            seen["ps"].append(open(path, "rb").read().replace(b"\\0", b" ").decode())
        except OSError:
            pass
    try:
        seen["key_file"] = open(key_file).read()
    except OSError as exc:
        seen["key_file"] = "unreadable: " + type(exc).__name__
    seen["key_dirs"] = {}
    for key_dir in key_dirs:
        try:
            seen["key_dirs"][key_dir] = sorted(os.listdir(key_dir))
        except OSError as exc:
            seen["key_dirs"][key_dir] = "unlistable: " + type(exc).__name__
    open("probe.json", "w").write(json.dumps(seen))
    print("probed")
    """
)


def _probe_home(
    root: Path, key_dir: Path, sandboxed: bool, more_dirs: tuple[Path, ...] = ()
) -> tuple[Home, Path]:
    key = key_dir / "vault.key"
    python = os.path.realpath(sys.executable)  # not a venv's link: a sandbox sees the target
    argv = json.dumps([python, "-c", PROBE, str(key), str(key_dir), *map(str, more_dirs)])
    home = Home(root)
    ok(pfar(home, "init", "--key-file", str(key)))
    (home.templates_dir / "probe.toml").write_text('id = "probe"\nallowed_tools = ["shell.run"]\n')
    (home.scripts_dir / "default.toml").write_text(
        textwrap.dedent(
            f"""
            [[responses]]
            template = "probe"
            phase = "plan"
            [[responses.json.steps]]
            tool = "shell.run"
            args = {{ argv = {argv} }}
            [[responses]]
            template = "probe"
            phase = "synthesize"
            text = "done"
            """
        )
    )
    if sandboxed:
        home.config.write_text(home.config.read_text() + "\n[sandbox]\nenabled = true\n")
    return home, key


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A key directory outside /tmp (a sandbox has a /tmp of its own: a key there would
    be hidden for that reason alone), removed after."""
    where = Path.home() / f".pfar-key-test-{os.getpid()}-{time.monotonic_ns()}"
    where.mkdir(mode=0o700)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _kernel(
    home: Home, env: dict[str, str], fds: dict[str, str]
) -> tuple[subprocess.Popen[bytes], Path]:
    """`pfar run` with a passphrase on a descriptor, its output in a file."""
    log = home.root.parent / f"kernel-{time.monotonic_ns()}.log"
    full = {**os.environ, "PFAR_HOME": str(home.root), **env}
    full.pop("PFAR_FAULT", None)
    pipes = []
    for name, text in fds.items():
        r, w = os.pipe()
        os.write(w, text.encode())
        os.close(w)
        pipes.append(r)
        full[name] = str(r)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pfar", "run", "--no-stdin"],
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=tuple(pipes),
            start_new_session=True,
        )
    for fd in pipes:
        os.close(fd)

    def ready() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            call(home, {"op": "ping"}, timeout=1.0)
        except Exception:
            return False
        return True

    wait_for(ready, what="the kernel")
    return proc, log


@pytest.mark.parametrize("how", ["key file", "passphrase"])
def test_the_key_reaches_no_argv_log_or_environment_of_what_the_kernel_starts(
    tmp_path: Path, how: str
) -> None:
    home, key_path = _probe_home(tmp_path / "home", tmp_path / "keys", sandboxed=False)
    env: dict[str, str] = {}
    fds: dict[str, str] = {}
    if how == "passphrase":
        ok(
            pfar_env(
                home, "vault", "rekey", "--passphrase", fds={"PFAR_NEW_PASSPHRASE_FD": PASSPHRASE}
            )
        )
        fds = {"PFAR_PASSPHRASE_FD": PASSPHRASE + "\n"}
        needles = [PASSPHRASE]
    else:
        needles = [key_path.read_text().strip()]
    proc, log = _kernel(home, env, fds)
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode()
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().decode(errors="replace")
        # (the CLI reads the vault itself to wait: it needs the passphrase too)
        submitted = pfar_env(home, "submit", "probe", "look around", "--wait", "--json", fds=fds)
        done = json.loads(ok(submitted))
        assert done["state"] == "Completed", done
        seen = json.loads((home.workspace(done["task_id"]) / "probe.json").read_text())
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    everything = "\n".join(
        [cmdline, environ, log.read_text(), json.dumps(seen["env"]), seen["environ"], *seen["ps"]]
    )
    for needle in needles:
        assert needle not in everything
    assert "PFAR_PASSPHRASE_FD" not in seen["environ"]  # read, closed and dropped at start
    # nor in any file of the home (the vault files are encrypted under it), but for
    # what the probe read from the key file itself: outside a sandbox a command reads
    # what its owner can (test_a_sandboxed_command_cannot_read_the_key)
    (home.workspace(done["task_id"]) / "probe.json").unlink()
    for path in home.root.rglob("*"):
        if path.is_file():
            assert all(n.encode() not in path.read_bytes() for n in needles), path


needs_bwrap = pytest.mark.skipif(
    not sandbox.available() and os.environ.get("CI") != "true",
    reason="bubblewrap (bwrap) is not installed",
)


@needs_bwrap
def test_a_sandboxed_command_cannot_read_the_key(tmp_path: Path, outside_tmp: Path) -> None:
    key_dir, default_dir = outside_tmp / "keys", outside_tmp / "default-keys"
    home, key = _probe_home(tmp_path / "home", key_dir, sandboxed=True, more_dirs=(default_dir,))
    key_hex = key.read_text().strip()
    default_dir.mkdir(mode=0o700)
    (default_dir / "other.key").write_text("x")
    proc, _ = _kernel(home, {"PFAR_KEY_DIR": str(default_dir)}, {})
    try:
        done = json.loads(ok(pfar(home, "submit", "probe", "look around", "--wait", "--json")))
        assert done["state"] == "Completed", done
        seen = json.loads((home.workspace(done["task_id"]) / "probe.json").read_text())
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert seen["key_file"].startswith("unreadable"), seen["key_file"]
    # an empty folder in place of each: the key file's, and pfar's key directory
    assert seen["key_dirs"] == {str(key_dir): [], str(default_dir): []}
    assert key_hex not in json.dumps(seen)
    assert key.read_text().strip() == key_hex  # outside, it is all there
