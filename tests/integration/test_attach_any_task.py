"""`pfar attach` on a pipeline or a workflow task, through the real command and a
real kernel: the task's timeline so far, each new line as the task goes on, its
states, and the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from pfar.vault.home import Home

from ..support import db, make_home, pfar, running_kernel, said, task_states, wait_for


class Viewer:
    """`pfar attach ID` as a real process; what it printed so far, read as it comes."""

    def __init__(self, home: Home, task_id: str) -> None:
        env = {**os.environ, "PFAR_HOME": str(home.root), "COLUMNS": "1000", "NO_COLOR": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pfar", "attach", task_id],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def wait_for(self, text: str) -> None:
        wait_for(lambda: self.saw(text), what=f"the viewer to show {text!r}: {self.lines}")

    def finish(self) -> int:
        code = self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=30)


def test_attach_shows_a_pipeline_tasks_timeline_as_it_grows(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)  # run_command asks before shell.run
    with running_kernel(home):
        sub = pfar(home, "submit", "run_command", "echo watched", "--json")
        assert sub.returncode == 0, said(sub)
        task_id = json.loads(sub.stdout)["task_id"]
        viewer = Viewer(home, task_id)
        try:
            viewer.wait_for("created from run_command")
            viewer.wait_for("[AwaitingApproval]")  # live: the task waits, the viewer too
            assert viewer.proc.poll() is None
            assert not viewer.saw("shell.run (run it): completed")

            def approval() -> str | None:
                with db(home) as conn:
                    row = conn.execute("SELECT approval_id FROM pending_approvals").fetchone()
                return None if row is None else str(row[0])

            approved = pfar(home, "approve", str(wait_for(approval, what="the question")))
            assert approved.returncode == 0, said(approved)
            assert viewer.finish() == 0  # the task's end ends the stream
        finally:
            viewer.stop()
        assert viewer.saw("shell.run (run it): completed"), viewer.lines
        assert viewer.lines[-1] == "task ended: Completed", viewer.lines
    assert task_states(home) == {task_id: "Completed"}


WORKFLOW = """\
name = "watched"
[[steps]]
name = "one"
run = ["sh", "-c", "echo one"]
[[steps]]
name = "wait"
run = ["sh", "-c", "while [ ! -e go ]; do sleep 0.1; done; echo two"]
"""


def test_attach_shows_a_workflow_tasks_steps_as_they_run(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", script="")
    work = tmp_path / "work"
    work.mkdir()
    definition = tmp_path / "wf.toml"
    definition.write_text(WORKFLOW)
    with running_kernel(home):
        r = pfar(home, "workflow", "start", str(definition), str(work))
        assert r.returncode == 0, said(r)
        task_id = r.stdout.split()[2]
        viewer = Viewer(home, task_id)
        try:
            viewer.wait_for("step 1/2")
            viewer.wait_for("step 2/2")  # started: the second step waits for `go`
            assert viewer.proc.poll() is None
            assert not viewer.saw("task ended")
            (work / "go").touch()
            assert viewer.finish() == 0
        finally:
            viewer.stop()
        assert viewer.lines[-1] == "task ended: Completed", viewer.lines
    assert task_states(home) == {task_id: "Completed"}
