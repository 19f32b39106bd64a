"""`pfar reload` and SIGHUP through a real kernel: a template added while it runs (a
cron one too: its schedule starts) can be used at once, hooks and the settings that
can change live are applied, the others are named as needing a restart, and a file
that does not load is named while everything else goes on."""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

from pfar.vault.home import Home

from ..support import make_home, pfar, running_kernel, said, wait_for

GREET = """\
id = "greet"
description = "Say hello in a file"
trigger = "cli"
allowed_tools = ["file.write"]
"""

GREET_SCRIPT = """
[[responses]]
template = "greet"
phase = "plan"
[responses.json]
steps = [{ tool = "file.write", args = { path = "hello.md", content = "$input" } }]
"""


def tick(template_id: str) -> str:
    return textwrap.dedent(
        f"""\
        id = "{template_id}"
        description = "A scheduled tick"
        trigger = "cron:0 9 * * *"
        allowed_tools = ["file.read"]
        """
    )


def _reload(home: Home) -> dict[str, object]:
    done = pfar(home, "reload", "--json")
    assert done.returncode == 0, said(done)
    found = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


def _schedules(home: Home) -> list[str]:
    rows = json.loads(pfar(home, "queue", "--json").stdout)
    return [r["reason"] for r in rows if r["reason"].startswith("schedule:")]


def test_reload_takes_new_templates_hooks_and_live_settings(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", examples=True)
    hooked = tmp_path / "hooked"
    with running_kernel(home) as k:
        assert _schedules(home) == []
        session = pfar(home, "session", "new", str(tmp_path), "t1")
        assert session.returncode == 0, said(session)
        session_id = session.stdout.split()[1]
        refused = pfar(home, "session", "resume", session_id)
        assert refused.returncode == 1 and "then `pfar reload`" in said(refused)
        (home.templates_dir / "greet.toml").write_text(GREET)
        (home.templates_dir / "tick.toml").write_text(tick("tick"))
        with (home.scripts_dir / "default.toml").open("a") as script:
            script.write(GREET_SCRIPT)
        home.config.write_text(
            textwrap.dedent(
                f"""\
                [sessions]
                agent_command = ["true"]
                [scheduler]
                max_concurrent = 3
                [[hooks]]
                point = "TaskCompleted"
                command = "touch {hooked}"
                """
            )
        )

        done = _reload(home)
        assert done["added"] == ["greet", "tick"]
        assert done["hooks"] == 1
        assert done["applied"] == ["sessions", "hooks"]
        assert done["restart_needed"] == ["scheduler"]
        assert done["problems"] == []
        told = pfar(home, "reload")
        assert "a restart is needed for them to apply: [scheduler]" in said(told)

        # the new cron template's schedule runs; the new template takes tasks
        (line,) = _schedules(home)
        assert line.startswith("schedule: tick next runs at")
        greeted = pfar(home, "submit", "greet", "hello there", "--wait", "--json")
        assert greeted.returncode == 0, said(greeted)
        task = json.loads(greeted.stdout)
        assert task["state"] == "Completed", task
        assert (home.workspace(task["task_id"]) / "hello.md").read_text() == "hello there"
        # the hook added by the reload saw it complete
        wait_for(hooked.exists, what="the TaskCompleted hook added by the reload")

        # a session started now runs the agent command set after the start
        started = pfar(home, "session", "resume", session_id)
        assert started.returncode == 0, said(started)

        # a template that does not load is named (exit 1); the others go on
        (home.templates_dir / "broken.toml").write_text('id = "broken"\nallowed_tools = [1]\n')
        broken = pfar(home, "reload")
        assert broken.returncode == 1
        assert "not loaded:" in said(broken) and "broken.toml" in said(broken)
        (home.templates_dir / "broken.toml").unlink()

        # SIGHUP does the same, and the kernel goes on
        (home.templates_dir / "tock.toml").write_text(tick("tock"))
        k.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload: templates:" in k.output(), what="the SIGHUP reload's answer")
        assert k.proc.poll() is None
        assert len(_schedules(home)) == 2
        assert "  new: tock" in k.output() or "new: tock" in k.output()
