"""`pfar hooks` and the console's Kernel page: the handlers a running kernel listens
with, in the order they fire, with what each runs masked where it holds a secret."""

from __future__ import annotations

import json
from pathlib import Path

from ..console_support import CONSOLE_CONFIG, logged_in, serving
from ..support import make_home, pfar

SECRET = "hook-secret-7f3a9c21"

HOOKS = f"""
[[hooks]]
point = "PreToolUse"
command = "cat >/dev/null; echo '{{}}'"
tools = ["Bash", "Write"]
timeout_seconds = 3

[[hooks]]
point = "TaskCompleted"
command = "curl -s -H 'token: {SECRET}' https://example.invalid/done"

[[hooks]]
point = "TaskFailed"
command = "echo {"x" * 45} {SECRET} >> failures.log"
"""


def test_the_running_kernels_hooks_are_listed_in_firing_order_with_secrets_masked(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", config=CONSOLE_CONFIG + HOOKS, examples=True)
    with serving(home):
        stored = pfar(home, "secret", "set", "hook_token", stdin=SECRET)
        assert stored.returncode == 0, stored.stderr
        shown = pfar(home, "hooks", "--json")
        assert shown.returncode == 0, shown.stderr
        assert SECRET not in shown.stdout
        found = json.loads(shown.stdout)
        assert [(h["point"], h["kind"], h["tools"]) for h in found] == [
            ("PreToolUse", "command", ["Bash", "Write"]),
            ("TaskCompleted", "command", []),
            ("TaskFailed", "command", []),
        ]
        # a long command is shortened after its secret is masked, never through it
        assert SECRET[:8] not in shown.stdout and "[REDACT" in found[2]["name"], found[2]
        assert found[0]["timeout_seconds"] == 3 and found[0]["fails_closed"] is True
        assert found[1]["fails_closed"] is False and "curl" in found[1]["name"]
        table = pfar(home, "hooks")
        assert table.returncode == 0 and "PreToolUse" in table.stdout and "blocks" in table.stdout

        page = logged_in(home).get("/kernel")
        assert page.status_code == 200
        assert "PreToolUse" in page.text and "Bash, Write" in page.text
        assert SECRET not in page.text

    stopped = pfar(home, "hooks")  # no kernel: the running kernel's handlers are asked for
    assert stopped.returncode != 0 and "kernel" in stopped.stderr.lower(), stopped.stderr


def test_a_kernel_without_hooks_says_so(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", config=CONSOLE_CONFIG, examples=True)
    with serving(home):
        assert json.loads(pfar(home, "hooks", "--json").stdout) == []
        assert "no hook handler listens" in pfar(home, "hooks").stdout
        assert "No hook handler listens" in logged_in(home).get("/kernel").text
