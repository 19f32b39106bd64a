"""Helpers of the MCP tests: the test server's command and request log, and a config
that runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

SERVER = Path(__file__).with_name("mcp_test_server.py")


def server_command(log: Path, hold: Path | None = None) -> list[str]:
    return [sys.executable, str(SERVER), str(log), *([str(hold)] if hold else [])]


def server_toml(name: str, command: list[str] | None, extra: str = "") -> str:
    """A `[[mcp.servers]]` entry (no command: `extra` gives its url)."""
    started = f"command = {json.dumps(command)}\n" if command is not None else ""
    return f"[[mcp.servers]]\nname = {json.dumps(name)}\n{started}{extra}"


def requests(log: Path) -> list[dict[str, Any]]:
    """The test server's request log: what it was asked, from its own side."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def starts(log: Path, tool: str) -> list[dict[str, Any]]:
    return [r for r in requests(log) if r["event"] == "start" and r["tool"] == tool]


def need_module(module: str) -> None:
    """Skip (fail under CI=true) when a server package of the test extra is missing."""
    found = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, check=False
    )
    if found.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is not installed (the test extra installs it)")
        pytest.skip(f"{module} is not installed: pip install -e '.[test]'")


def need_npm() -> str:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed")
    return npm


def children(log: Path) -> list[int]:
    """The helpers each start of the test server left running."""
    return [int(r["args"]["child"]) for r in requests(log) if r["event"] == "child"]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has ended: only its parent's wait is left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def server_everything() -> Path:
    """`@modelcontextprotocol/server-everything` from npm, installed once into a cache
    folder of the tests' own (its entry script); skipped when node, npm or the registry
    is not there (Node is optional: CI does not fail for it)."""
    npm = need_npm()
    folder = Path(tempfile.gettempdir()) / "pfar-tests-npm" / "server-everything"
    entry = folder / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    if not entry.exists():
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "@modelcontextprotocol/server-everything"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0 or not entry.exists():
            pytest.skip(f"npm install of server-everything failed: {done.stderr[-500:]}")
    return entry
