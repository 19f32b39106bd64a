"""The shell examples in the docs run as written.

Every ```sh block of README.md and docs/*.md runs, unless an HTML comment on the line
before it says why not (`<!-- not run: it installs pfar -->`). A document's blocks
run in order in one shell, as a reader types them one after the other, from a
directory that looks like a clone (its `.venv`), with a fresh `$HOME`, `$TMPDIR` and
an initialized `$PFAR_HOME` (the scripted model: no network beyond loopback). A
block whose text says it needs a running kernel is marked so, and gets one:

    <!-- run: with a kernel -->
    <!-- run: with a kernel; config: sessions.agent_command = ["sleep", "600"] -->

(the second one on a config.toml of that line alone: the settings the prose before
the block tells the reader to make). The README writes `.venv/bin/pfar`: its blocks
run with no `pfar` on PATH. The other documents write `pfar`: theirs run with a
`pfar` command on PATH, and only that one (not the venv's python)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^([ \t]*)```(\w*)[^\n]*\n(.*?)^\1```[ \t]*$", re.DOTALL | re.MULTILINE)
MARK = re.compile(r"<!--\s*(not run|run):\s*(.*?)\s*-->\s*$", re.DOTALL)
SHELLS = {"sh", "bash", "shell"}


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    code: str
    kernel: bool = False
    config: str | None = None


def _blocks(doc: str) -> list[Block]:
    """The runnable shell blocks of `doc`, in order. A block left unmarked and one
    marked neither way are errors of the test, not skipped in silence."""
    text = (ROOT / doc).read_text()
    found = []
    for m in FENCE.finditer(text):
        if m.group(2) not in SHELLS:
            continue
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip().rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        if mark is not None and mark.group(1) == "not run":
            assert mark.group(2), f"{doc}:{line}: say why the block is not run"
            continue
        how = mark.group(2) if mark is not None else ""
        config = None
        if "config:" in how:
            config = how.split("config:", 1)[1].strip()
        found.append(Block(doc, line, textwrap.dedent(m.group(3)), "with a kernel" in how, config))
    return found


# started and stopped by the session between blocks, never by a block: a kernel on
# $PFAR_HOME that answers (its "running" line) before the block that needs it runs
PRELUDE = r"""
set -eo pipefail
__kpid=
__kernel_down() {
  if [ -n "$__kpid" ]; then kill -TERM "$__kpid" 2>/dev/null || true; wait "$__kpid" || true; fi
  __kpid=
}
__kernel_up() {
  __kernel_down
  __klog="$PFAR_HOME.session-kernel.$RANDOM.log"
  .venv/bin/pfar run --no-stdin > "$__klog" 2>&1 < /dev/null &
  __kpid=$!
  for _ in $(seq 1200); do
    grep -q "pfar kernel running on" "$__klog" && return 0
    kill -0 "$__kpid" 2>/dev/null || break
    sleep 0.1
  done
  echo "the kernel for the next block did not start:" >&2; cat "$__klog" >&2; return 1
}
__config() {  # config.toml holds this line alone: every other key its default
  printf '%s\n' "$1" > "$PFAR_HOME/config.toml"; chmod 600 "$PFAR_HOME/config.toml"
}
trap __kernel_down EXIT
"""


def _script(blocks: list[Block]) -> str:
    parts = [PRELUDE]
    for b in blocks:
        parts.append(f'echo "### {b.doc} line {b.line}" >&2')
        if b.config is not None:
            parts.append(f"__config {_quote(b.config)}")
        if b.kernel:
            parts.append("__kernel_up")
        parts.append(b.code)
    return "\n".join(parts) + "\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _path(doc: str, tmp: Path) -> str:
    """PATH without pfar's venv; the other docs' `pfar` command on it alone."""
    venv_bin = str(VENV / "bin")
    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and d != venv_bin]
    kept = [d for d in kept if not (Path(d) / "pfar").exists()]
    if doc != "README.md":
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "pfar").symlink_to(VENV / "bin" / "pfar")
        kept.insert(0, str(bin_dir))
    return os.pathsep.join(kept)


RUNNABLE = [doc for doc in DOCS if _blocks(doc)]

# what a document's examples print when they did their work, beside exiting 0
SHOWS = {
    "README.md": ["buy milk", "hello from a task", "Implemented", "TERMINATED"],
    "docs/costs.md": ["claude-sonnet-4-5", "my-local-model"],
    "docs/hooks.md": ['"tool": "Bash"'],
    "docs/mcp.md": ["time (stdio) not running", '"state": "not started"'],
    "docs/webhooks.md": ['"task_id"'],
}


@pytest.mark.crash  # kernels run as subprocesses, stopped at the end
@pytest.mark.parametrize("doc", RUNNABLE)
def test_a_documents_shell_examples_run_as_written(tmp_path: Path, doc: str) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(VENV)
    home_dir, tmp_dir, pfar_home = tmp_path / "user", tmp_path / "tmp", tmp_path / "pfar"
    home_dir.mkdir()
    tmp_dir.mkdir()
    env = {
        "PATH": _path(doc, tmp_path),
        "HOME": str(home_dir),
        "TMPDIR": str(tmp_dir),
        "PFAR_HOME": str(pfar_home),
        "LANG": "C.UTF-8",
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    subprocess.run([str(VENV / "bin" / "pfar"), "init"], env=env, check=True, capture_output=True)
    script = _script(_blocks(doc))
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=clone,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its kernels too: stopped with it below
    )
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        _stop_group(proc)
    assert proc.returncode == 0, f"{doc} (exit {proc.returncode}):\n{output}"
    for shown in SHOWS.get(doc, []):
        assert shown in output, f"{doc} did not print {shown!r}:\n{output}"


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """What the blocks left running (a kernel a block started with `&`): asked to stop,
    then killed."""
    for sig, grace in ((signal.SIGTERM, 40.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if not _group_alive(proc.pid):
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_every_shell_block_is_run_or_says_why_not() -> None:
    """A new block is run by default; one that cannot be says why in its comment."""
    for doc in DOCS:
        _blocks(doc)  # asserts each "not run" gives its reason


def test_the_readme_says_the_test_command_installs_system_packages() -> None:
    """The test command, run as root, installs Debian packages: said beside it."""
    text = (ROOT / "README.md").read_text()
    command = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]'"
    before = text[: text.index(command)].rsplit("\n\n", 2)[-2]
    assert "apt-get install" in before, before
