"""A task's timeline says who held it and what its model calls cost, against a real
kernel process: paused from the console's page, resumed by `pfar resume`, both actors
shown by `pfar task show` (words and `--json`) and on the console's page."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..console_support import CONSOLE_CONFIG, csrf_of, logged_in, serving
from ..support import KernelProcess, make_home, pfar, wait_for, wait_for_file

TEMPLATE = """
    id = "cmd"
    description = "Run a shell command"
    allowed_tools = ["shell.run"]
    [timeouts]
    step_seconds = 20
"""

SCRIPT = """
    [[responses]]
    template = "cmd"
    phase = "plan"
    input_tokens = 700
    output_tokens = 30
    json = { steps = [ { tool = "shell.run", args = { argv = ["sh", "-c", "$input"] } } ] }

    [[responses]]
    template = "cmd"
    phase = "synthesize"
    input_tokens = 900
    output_tokens = 12
    text = "ran: $step0"
"""

# dollars per million tokens: the plan costs 700 * 2 + 30 * 10 = 1700 µ$
CONFIG = (
    CONSOLE_CONFIG
    + """
[llm]
provider = "scripted"
model = "script-m"
[llm.prices.script-m]
input = 2.0
output = 10.0
"""
)


def _shown(home: Any, task_id: str) -> dict[str, Any]:
    r = pfar(home, "task", "show", task_id, "--json")
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def _state(home: Any, task_id: str) -> str:
    return str(_shown(home, task_id)["task"]["state"])


def test_who_paused_and_resumed_and_what_each_model_call_cost_are_in_the_timeline(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": TEMPLATE}, script=SCRIPT, config=CONFIG)
    with serving(home):
        client = logged_in(home)
        # the command waits for the test's word, so the pause always lands while it runs
        gate = tmp_path / "go"
        command = f"{wait_for_file(gate)}; echo slept"
        submitted = pfar(home, "submit", "cmd", command, "--json")
        assert submitted.returncode == 0, submitted.stderr
        task_id = json.loads(submitted.stdout)["task_id"]
        page = client.get(f"/tasks/{task_id}")
        assert page.status_code == 200
        for action in ("pause", "resume", "cancel"):  # working: a pause may stand, too
            assert f'action="/tasks/{task_id}/{action}"' in page.text, action
        paused = client.post(f"/tasks/{task_id}/pause", data={"csrf": csrf_of(page.text)})
        assert paused.status_code in (200, 303), paused.text
        gate.touch()
        wait_for(lambda: _state(home, task_id) == "Paused", what="the pause")
        resumed = pfar(home, "resume", task_id[:8])
        assert resumed.returncode == 0, resumed.stderr
        wait_for(lambda: _state(home, task_id) == "Completed", timeout=30, what="the end")
        ended = client.get(f"/tasks/{task_id}").text
        assert f'action="/tasks/{task_id}/' not in ended  # an ended task offers no hold

        words = pfar(home, "task", "show", task_id[:8])
        assert words.returncode == 0, words.stderr
        lines = [line.split("  ", 2)[-1] for line in words.stdout.splitlines()]
        (pause,) = [line for line in lines if line.startswith("paused (from ")]
        assert " by console (session " in pause
        (resume,) = [line for line in lines if line.startswith("resumed (")]
        assert re.fullmatch(rf"resumed \(\w+\) by cli \(uid {os.getuid()}, pid \d+\)", resume)
        calls = [line for line in lines if line.startswith("model call ")]
        assert calls == [  # extract (unscripted: no usage), plan, synthesize
            "model call scripted/script-m: 0 tokens in, 0 out, $0.000000",
            "model call scripted/script-m: 700 tokens in, 30 out, $0.001700",
            "model call scripted/script-m: 900 tokens in, 12 out, $0.001920",
        ]
        at = lines.index
        assert at(calls[1]) < at(pause) < at(resume) < at(calls[2])
        assert "now Completed" in lines

        timeline = _shown(home, task_id)["timeline"]
        kinds = [e["kind"] for e in timeline]
        assert kinds[0] == "created" and kinds.count("now") == 1
        (held,) = [e for e in timeline if e["kind"] == "paused"]
        assert held["by"]["surface"] == "console" and held["by"]["who"].startswith("session ")
        (back,) = [e for e in timeline if e["kind"] == "resumed"]
        assert back["by"]["surface"] == "cli"
        assert re.fullmatch(rf"uid {os.getuid()}, pid \d+", back["by"]["who"])
        models = [e for e in timeline if e["kind"] == "model_call"]
        assert [(m["input_tokens"], m["output_tokens"], m["cost_usd"]) for m in models] == [
            (0, 0, 0.0),
            (700, 30, 0.0017),
            (900, 12, 0.00192),
        ]
        (ended,) = [e for e in timeline if e["kind"] == "step_ended"]
        assert ended["status"] == "completed" and "slept" in json.dumps(ended["result"])

        shown = client.get(f"/tasks/{task_id}").text
        assert 'class="entry entry-paused"' in shown and "by <strong>console</strong>" in shown
        assert "by <strong>cli</strong>" in shown
        assert '<span class="tokens">700 tokens in, 30 out</span>' in shown
        assert '<span class="cost">$0.001700</span>' in shown
        assert "<summary>result</summary>" in shown


def test_a_restart_that_picked_the_task_up_and_who_cancelled_it_are_in_its_timeline(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", templates={"cmd": TEMPLATE}, script=SCRIPT)
    kernel = KernelProcess(home)
    try:
        kernel.wait_ready()
        # the command says it runs: a task seen Executing may not have journaled its
        # step's start yet, and a kill then is no write in flight
        ran = tmp_path / "ran"
        submitted = pfar(home, "submit", "cmd", f"touch {ran}; sleep 30", "--json")
        assert submitted.returncode == 0, submitted.stderr
        task_id = json.loads(submitted.stdout)["task_id"]
        wait_for(ran.exists, what="its step to run")
        kernel.kill()  # SIGKILL mid-step: the next start asks the owner about the command cut off
        kernel = KernelProcess(home)
        kernel.wait_ready()
        (recovered,) = [x for x in _shown(home, task_id)["timeline"] if x["kind"] == "recovered"]
        assert recovered["action"] == "AskOwner" and "may have happened" in recovered["reason"]
        cancelled = pfar(home, "cancel", task_id[:8])
        assert cancelled.returncode == 0, cancelled.stderr
        words = pfar(home, "task", "show", task_id[:8]).stdout.splitlines()
        said = [line.split("  ", 2)[-1] for line in words]
        (line,) = [s for s in said if s.startswith("recovered at a restart: ")]
        assert line.startswith("recovered at a restart: AskOwner (the write in flight (shell.run")
        (line,) = [s for s in said if s.startswith("cancelled")]
        assert re.fullmatch(rf"cancelled by cli \(uid {os.getuid()}, pid \d+\)", line)
        assert "now Cancelled: cancelled by the owner" in said
        (entry,) = [x for x in _shown(home, task_id)["timeline"] if x["kind"] == "cancelled"]
        assert entry["by"]["surface"] == "cli"
    finally:
        if kernel.proc.poll() is None:
            kernel.terminate()
