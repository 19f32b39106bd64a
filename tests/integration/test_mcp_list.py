"""`pfar mcp list`: each server's state and its tools with their semantics, from the
running kernel (through the operator API) or, with none running, from config.toml."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from ..mcp_support import server_command, server_toml, starts
from ..support import make_home, pfar, running_kernel, said, wait_for


def test_mcp_list_shows_each_servers_state_and_tools(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    work = tmp_path / "work"
    work.mkdir()
    config = (
        '[loop]\ntools = ["Read"]\n'
        + server_toml("t", server_command(log), "[mcp.servers.tools.peek]\nask = false\n")
        + server_toml("broken", [sys.executable, "-c", "raise SystemExit(3)"])
        + server_toml("off", ["true"], "enabled = false\n")
    )
    script = textwrap.dedent(
        """
        [[turns]]
        turn = 1
        text = "Peeking."
        tool_calls = [ { name = "mcp__t__peek", input = { name = "x" } } ]

        [[turns]]
        text = "Done: $last"
        """
    )
    home = make_home(tmp_path / "home", script=script, config=config)

    offline = json.loads(pfar(home, "mcp", "list", "--json").stdout)
    assert [(s["name"], s["state"], s["tools"]) for s in offline] == [
        ("t", "not running", []),
        ("broken", "not running", []),
        ("off", "disabled", []),
    ]

    with running_kernel(home) as k:
        before = json.loads(pfar(home, "mcp", "list", "--json").stdout)
        assert [s["state"] for s in before] == ["not started", "not started", "disabled"]
        k.request("loop", prompt="peek", directory=str(work))
        wait_for(lambda: starts(log, "peek"), what="the call")
        shown = wait_for(
            lambda: (
                (found := json.loads(pfar(home, "mcp", "list", "--json").stdout))
                and found[1]["state"] == "failed"
                and found
            ),
            what="the broken server to fail",
        )
        t, broken, off = shown
        assert t["state"] == "running" and t["pid"] and t["transport"] == "stdio"
        tools = {x["name"]: (x["semantics"], x["asks"]) for x in t["tools"]}
        assert tools["mcp__t__peek"] == ("read", False)
        assert tools["mcp__t__put"] == ("idempotent", None)
        assert tools["mcp__t__append"] == ("write", True)
        assert broken["why"] == "its process exited with 3"
        assert off["state"] == "disabled"
        text = said(pfar(home, "mcp", "list"))
        assert "t (stdio) running" in text
        assert "│ mcp__t__append │ append │ write │ every call │" in text
        assert "broken (stdio) failed: its process exited with 3" in text
