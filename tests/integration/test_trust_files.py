"""The file tools at the trust boundary, through a real kernel process: protected paths
hold for every tool at any depth (pfar's home and the credential folders built in),
and a chat loop does not work in the whole home."""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path
from typing import Any

from pfar.config import Config

from ..support import db, make_home, running_kernel, wait_for

SECRETS = {
    ".env": "ENV-TOP-SECRET",
    "app/sub/.env": "ENV-DEEP-SECRET",
    "keys/server.pem": "PEM-PRIVATE-SECRET",
    ".ssh/id_rsa": "SSH-PRIVATE-SECRET",
    ".aws/credentials": "AWS-PRIVATE-SECRET",
}

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("grep", "Grep", {"pattern": "SECRET", "output_mode": "content"}),
    ("grep_files", "Grep", {"pattern": "SECRET"}),
    ("glob", "Glob", {"pattern": "**/*"}),
    ("glob_home", "Glob", {"pattern": "**", "path": ".pfar"}),
    ("read_deep_env", "Read", {"file_path": "app/sub/.env"}),
    ("read_link", "Read", {"file_path": "innocent.txt"}),
    ("read_ssh", "Read", {"file_path": ".ssh/id_rsa"}),
    ("read_owner_log", "Read", {"file_path": ".pfar/owner.log"}),
    ("read_vault", "Read", {"file_path": ".pfar/secrets.db"}),
    ("write_hook", "Write", {"file_path": ".pfar/hooks/evil.py", "content": "import os\n"}),
    (
        "edit_config",
        "Edit",
        {"file_path": ".pfar/config.toml", "old_string": "[", "new_string": "#["},
    ),
    ("write_via_link", "Write", {"file_path": "drop/authorized_keys", "content": "ssh-rsa x\n"}),
    ("read_fine", "Read", {"file_path": "notes.txt"}),
]


def _script() -> str:
    calls = ", ".join(
        f"{{ id = {json.dumps(cid)}, name = {json.dumps(tool)}, input = {_toml(args)} }}"
        for cid, tool, args in CALLS
    )
    return textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        text = "Looking around."
        tool_calls = [ {calls} ]

        [[turns]]
        text = "Done."
        """
    )


def _toml(args: dict[str, Any]) -> str:
    return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in args.items()) + " }"


def _results(home: Any, task_id: str) -> dict[str, tuple[str, bool]]:
    with contextlib.closing(db(home)) as conn:
        rows = conn.execute(
            "SELECT body_json FROM loop_turns WHERE task_id = ? ORDER BY seq", (task_id,)
        ).fetchall()
    found: dict[str, tuple[str, bool]] = {}
    for (body,) in rows:
        turn = json.loads(body)
        for r in turn.get("results", []) if isinstance(turn, dict) else []:
            found[r["call_id"]] = (r["content"], bool(r.get("is_error")))
    return found


def test_no_file_tool_reaches_a_protected_path_pfars_home_or_credentials(tmp_path: Path) -> None:
    user = tmp_path / "user"  # the kernel's $HOME, and the loop's directory as `~` was
    for name, secret in SECRETS.items():
        (user / name).parent.mkdir(parents=True, exist_ok=True)
        (user / name).write_text(secret + "\n")
    (user / "notes.txt").write_text("nothing to hide\n")
    (user / "innocent.txt").symlink_to(user / ".ssh" / "id_rsa")
    (user / "drop").symlink_to(user / ".ssh")
    tools = ["Read", "Write", "Edit", "Glob", "Grep"]
    config = f"[loop]\ntools = {json.dumps(tools)}\nalways_allow = {json.dumps(tools)}\n"
    home = make_home(user / ".pfar", script=_script(), config=config)
    (home.root / "owner.log").write_text("OWNER-LOG-SECRET\n")
    config_before = home.config.read_text()

    with running_kernel(home, env={"HOME": str(user)}) as k:
        task_id = k.request("loop", prompt="look around", directory=str(user), once=True)["task_id"]

        def state() -> str:
            return str(k.request("task_show", task_id=task_id)["task"]["state"])

        wait_for(lambda: state() == "Completed", what="the loop task to end")
        told = _results(home, task_id)

    assert set(told) == {cid for cid, _, _ in CALLS}
    everything = "\n".join(text for text, _ in told.values())
    for secret in [*SECRETS.values(), "OWNER-LOG-SECRET"]:
        assert secret not in everything, secret
    # Grep and Glob leave protected files out, names and all, and say how many
    for cid in ("grep", "grep_files", "glob"):
        text, error = told[cid]
        assert not error, text
        assert ".env" not in text and ".pem" not in text and ".ssh" not in text, text
        assert ".pfar" not in text and "owner.log" not in text, text
        assert "protected" in text and "skipped" in text, text
    assert "notes.txt" in told["glob"][0]
    # every other reach is refused before it runs, naming why; no owner was asked
    for cid in (
        "glob_home",
        "read_deep_env",
        "read_link",
        "read_ssh",
        "read_owner_log",
        "read_vault",
        "write_hook",
        "edit_config",
        "write_via_link",
    ):
        text, error = told[cid]
        assert "protected path" in text, (cid, text)
    assert "pattern '.env'" in told["read_deep_env"][0]
    assert "pfar's home" in told["write_hook"][0]
    assert "credential" in told["read_ssh"][0]
    assert told["read_fine"] == ("     1\tnothing to hide\n", False)
    assert not (home.root / "hooks" / "evil.py").exists()
    assert not (user / ".ssh" / "authorized_keys").exists()
    assert home.config.read_text() == config_before


def test_a_chat_loop_works_in_a_folder_of_its_own() -> None:
    assert Config().channels.directory == "~/pfar-work"
