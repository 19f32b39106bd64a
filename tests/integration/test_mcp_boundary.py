"""An MCP server is not the owner (docs/mcp.md, docs/security.md): started by a real
kernel, it gets the secret its config names through its environment (never its
command line, never the journal), and nothing else of the kernel's environment; in
the sandbox (`[sandbox] enabled`) it cannot read the vault or reach the control
socket."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..mcp_support import requests, server_command, server_toml
from ..support import KernelProcess, loop_turns, make_home, wait_for

SECRET = "tok-3f9a1c77e2b54d0a"  # the vault's value the server's config names
KERNEL_SECRET = "kernel-only-9d1e2c"  # in the kernel's environment, for no server


def _home(tmp_path: Path, sandbox: bool) -> tuple[Home, Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    srv = tmp_path / "srv"  # the server's own directory: its log is written there
    srv.mkdir()
    log = srv / "requests.jsonl"
    home_root = tmp_path / "home"
    probe = {
        "paths": [str(home_root / "vault"), str(home_root / "config.toml")],
        "sockets": [str(home_root / "control.sock")],
    }
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Looking around."
        tool_calls = [ {{ name = "mcp__t__probe", input = {_toml(probe)} }} ]

        [[turns]]
        text = "Seen: $last"
        """
    )
    extra = (
        f"cwd = {json.dumps(str(srv))}\n"
        'env = { API_TOKEN = "{{secret:api_token}}" }\n'
        "[mcp.servers.tools.probe]\nask = false\n"
    )
    config = '[loop]\ntools = ["Read"]\n' + server_toml("t", server_command(log), extra)
    if sandbox:
        config += "[sandbox]\nenabled = true\n"
    home = make_home(home_root, script=script, config=config)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("api_token", SECRET)
    store.close()
    return home, work, log


def _toml(value: dict[str, list[str]]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + " }"


def _probe(tmp_path: Path, sandbox: bool) -> tuple[Home, dict[str, object], str]:
    home, work, log = _home(tmp_path, sandbox)
    k = KernelProcess(home, env={"SOME_API_KEY": KERNEL_SECRET})
    try:
        k.wait_ready()
        tid = str(k.request("loop", prompt="look", directory=str(work))["task_id"])
        wait_for(lambda: [r for r in requests(log) if r["event"] == "probe"], what="the probe")
        wait_for(lambda: len(loop_turns(home, tid)) >= 4, what="the task's answer")
    finally:
        k.terminate()
    (seen,) = [r["args"] for r in requests(log) if r["event"] == "probe"]
    return home, seen, tid


def test_a_server_gets_its_secret_through_its_environment_and_nothing_of_the_kernels(
    tmp_path: Path,
) -> None:
    home, seen, tid = _probe(tmp_path, sandbox=False)
    env = seen["env"]
    assert isinstance(env, dict)
    assert env["API_TOKEN"] == SECRET
    assert SECRET not in json.dumps(seen["argv"])
    assert KERNEL_SECRET not in json.dumps(env)
    assert "SOME_API_KEY" not in env
    assert [k for k in env if k.startswith("PFAR_")] == ["PFAR_MCP"]
    assert seen["cwd"] == str(tmp_path / "srv")
    # outside a sandbox nothing confines it (docs/mcp.md): the probe sees what is there,
    # so the sandboxed test's "cannot" is the sandbox's doing
    assert seen["readable"] == {str(home.root / "vault"): True, str(home.config): True}
    assert seen["reachable"] == {str(home.control_socket): True}
    # what the journal and the logs keep of the call holds no secret
    assert SECRET not in json.dumps(loop_turns(home, tid))
    for path in (home.audit_log, home.owner_log):
        assert not path.exists() or SECRET not in path.read_text()
    (out,) = [p.read_text(errors="replace") for p in home.root.glob("kernel-*.out")]
    assert "MCP server t said: starting with token" in out  # its stderr, redacted
    assert SECRET not in out


def test_a_sandboxed_server_cannot_read_the_vault_or_reach_the_control_socket(
    tmp_path: Path,
) -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap (bwrap) is not installed")
        pytest.skip("bubblewrap (bwrap) is not installed")
    home, seen, _ = _probe(tmp_path, sandbox=True)
    readable, reachable = seen["readable"], seen["reachable"]
    assert isinstance(readable, dict) and isinstance(reachable, dict)
    assert readable == {str(home.root / "vault"): False, str(home.root / "config.toml"): False}
    assert reachable == {str(home.control_socket): False}
    env = seen["env"]
    assert isinstance(env, dict) and env["API_TOKEN"] == SECRET
