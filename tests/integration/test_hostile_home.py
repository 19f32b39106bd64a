"""A home that another local user can write to: pfar refuses to load from it, as ssh
refuses keys others can write, and names the file and the `chmod` that fixes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..support import KernelProcess, make_home, running_kernel, task_states
from .test_bad_input import CMD_SCRIPT, CMD_TEMPLATE, pfar, said


def _home(tmp_path: Path) -> Home:
    root = tmp_path / "home"
    r = pfar(root, "init")
    assert r.returncode == 0, said(r)
    return Home(root)


@pytest.mark.parametrize(
    ("target", "mode", "who"),
    [
        ("templates", 0o777, "world-writable"),
        ("scripts", 0o770, "group-writable"),
        ("scripts/default.toml", 0o646, "world-writable"),
        (".", 0o777, "world-writable"),
        ("config.toml", 0o620, "group-writable"),
        ("vault", 0o777, "world-writable"),
        ("vault/secrets.db", 0o666, "world-writable"),
    ],
)
def test_run_refuses_a_home_others_can_write(
    tmp_path: Path, target: str, mode: int, who: str
) -> None:
    home = _home(tmp_path)
    path = (home.root / target).resolve()
    path.chmod(mode)
    r = pfar(home, "run", "--no-stdin", timeout=30)
    assert r.returncode == 1, said(r)
    assert "Traceback" not in said(r)
    assert f"{path} is {who}" in said(r) or f"refused: it is {who}" in said(r), said(r)
    assert f"chmod go-w {path}`" in said(r), said(r)
    # read-only commands still read the vault (a template on its own is only not loaded:
    # test_a_group_writable_template_is_not_loaded)
    assert pfar(home, "tasks").returncode == 0
    # the fix it names is enough
    path.chmod(mode & ~0o022)
    with running_kernel(home):
        pass


def test_a_group_writable_template_is_not_loaded(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": CMD_TEMPLATE}, script=CMD_SCRIPT)
    open_tpl = home.templates_dir / "open.toml"
    open_tpl.write_text(CMD_TEMPLATE.replace('id = "cmd"', 'id = "open"'))
    open_tpl.chmod(0o664)
    k = KernelProcess(home)
    try:
        k.wait_ready()
        r = pfar(home, "submit", "open", "echo pwned")
        assert r.returncode == 1, said(r)
        assert f"{open_tpl}: refused: it is group-writable (mode 0664)" in said(r), said(r)
        assert f"chmod go-w {open_tpl}" in said(r)
        assert task_states(home) == {}
        # the others are loaded and run
        ok = pfar(home, "submit", "cmd", "echo fine", "--wait", "--json")
        assert ok.returncode == 0, said(ok)
        # a template loosened while the kernel runs is refused at its next use, even
        # before anyone changed it (a chmod changes neither its size nor its mtime)
        cmd_tpl = home.templates_dir / "cmd.toml"
        cmd_tpl.chmod(0o666)
        r = pfar(home, "submit", "cmd", "echo again")
        assert r.returncode == 1, said(r)
        assert f"{cmd_tpl}: refused: it is world-writable" in said(r), said(r)
        cmd_tpl.write_text(cmd_tpl.read_text() + "# changed by someone else\n")
        r = pfar(home, "submit", "cmd", "echo again")
        assert r.returncode == 1, said(r)
        assert f"{cmd_tpl}: refused: it is world-writable" in said(r), said(r)
    finally:
        k.terminate()
    started = " ".join(k.output().split())
    assert f"template not loaded: {open_tpl}: refused: it is group-writable" in started
    assert list(task_states(home).values()) == ["Completed"]
