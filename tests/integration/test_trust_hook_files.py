"""A hook from config.toml runs as the owner, so the files it is made of get the owner
and mode check that templates and scripts get: a command's script or a Python module
that another user could change stops the start, naming the file and the fix."""

from __future__ import annotations

from pathlib import Path

from ..support import KernelProcess, make_home, pfar, running_kernel, said

HOOK_SCRIPT = "#!/bin/sh\ncat > /dev/null\necho '{}'\n"
HOOK_MODULE = "def observe(event):\n    return None\n"
SCRIPT = '[[turns]]\ntext = "ok"\n'


def test_a_hook_command_whose_script_others_can_write_is_refused(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "on-task.sh"
    script.write_text(HOOK_SCRIPT)
    script.chmod(0o777)
    config = f'[[hooks]]\npoint = "TaskCreated"\ncommand = "/bin/sh {script} --quiet"\n'
    home = make_home(tmp_path / "home", config=config, script=SCRIPT)
    r = pfar(home, "run", "--no-stdin", timeout=30)
    assert r.returncode == 1, said(r)
    assert "Traceback" not in said(r)
    assert "hooks.0.command" in said(r), said(r)
    assert f"{script}: refused: it is world-writable" in said(r), said(r)
    assert f"chmod go-w {script}`" in said(r), said(r)
    # the fix it names is enough
    script.chmod(0o755)
    with running_kernel(home):
        pass


def test_a_hook_program_in_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "on-task"
    script.write_text(HOOK_SCRIPT)
    script.chmod(0o700)
    bin_dir.chmod(0o777)  # anyone could swap the program for their own
    config = f'[[hooks]]\npoint = "TaskCreated"\ncommand = "{script}"\n'
    home = make_home(tmp_path / "home", config=config, script=SCRIPT)
    r = pfar(home, "run", "--no-stdin", timeout=30)
    assert r.returncode == 1, said(r)
    assert f"{bin_dir} is world-writable" in said(r), said(r)
    assert f"chmod go-w {bin_dir}`" in said(r), said(r)


def test_a_python_hook_whose_module_others_can_write_is_refused(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    package = lib / "myhooks"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    module = package / "tasks.py"
    module.write_text(HOOK_MODULE + "raise SystemExit('imported before it was checked')\n")
    module.chmod(0o666)
    config = '[[hooks]]\npoint = "TaskCreated"\npython = "myhooks.tasks:observe"\n'
    home = make_home(tmp_path / "home", config=config, script=SCRIPT)
    env = {"PYTHONPATH": str(lib)}
    k = KernelProcess(home, env=env)
    code = k.wait_exit(timeout=30)
    out = " ".join(k.output().split())
    assert code == 1, out
    assert "imported before it was checked" not in out  # refused before it ran
    assert "hooks.0.python" in out, out
    assert f"{module}: refused: it is world-writable" in out, out
    assert f"chmod go-w {module}`" in out, out
    # the fix it names is enough
    module.write_text(HOOK_MODULE)
    module.chmod(0o644)
    with running_kernel(home, env=env):
        pass
