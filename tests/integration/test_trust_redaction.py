"""Redaction, the second line behind the vault: a task's command that prints a stored
secret in hex, upper case, reversed, rot13 or base32 leaves none of it in the journal,
the owner's log, the kernel's log or what the model is told, through a real kernel."""

from __future__ import annotations

import base64
import codecs
import json
import subprocess
import textwrap
import uuid
from pathlib import Path

from pfar.vault.home import Home

from ..crash.test_regressions import kernel, rows, wait_state
from ..support import make_home, pfar

SECRET = "tok-" + uuid.uuid4().hex

# each command prints the secret in one form; od and xxd set hex out in two ways
COMMANDS = [
    "od -An -tx1 token.txt",
    "xxd -p token.txt",
    "tr a-z A-Z < token.txt",
    "rev token.txt",
    "tr A-Za-z N-ZA-Mn-za-m < token.txt",
    "base32 token.txt",
]


def _forms() -> dict[str, str]:
    hexed = SECRET.encode().hex()
    return {
        "as is": SECRET,
        "hex": hexed,
        "HEX": hexed.upper(),
        "od's hex": " ".join(hexed[i : i + 2] for i in range(0, len(hexed), 2))[:20],
        "upper case": SECRET.upper(),
        "reversed": SECRET[::-1],
        "rot13": codecs.encode(SECRET, "rot13"),
        "base32": base64.b32encode(SECRET.encode()).decode().rstrip("="),
    }


def _leaks(home: Home) -> list[tuple[str, str]]:
    """(file, form) for each file of the home holding the secret in any form; the
    vault excepted, where it belongs."""
    found = []
    for path in home.root.rglob("*"):
        if not path.is_file() or path.name.startswith("secrets.db"):
            continue
        data = path.read_bytes().upper()
        for what, form in _forms().items():
            if form.upper().encode() in data:
                found.append((str(path.relative_to(home.root)), what))
    return found


def test_a_command_printing_a_secret_encoded_leaves_none_of_it_behind(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "token.txt").write_text(SECRET + "\n")
    calls = ", ".join(
        f'{{ name = "Bash", input = {{ command = {json.dumps(c)} }} }}' for c in COMMANDS
    )
    script = textwrap.dedent(
        f"""
        [[turns]]
        turn = 1
        tool_calls = [ {calls} ]

        [[turns]]
        text = "I saw: $last"
        """
    )
    config = '[loop]\ntools = ["Bash"]\nalways_allow = ["Bash"]\n'
    home = make_home(tmp_path / "home", script=script, config=config)
    stored = pfar(home, "secret", "set", "api_token", stdin=SECRET)
    assert stored.returncode == 0, stored.stderr
    with kernel(home) as k:
        tid = k.request("loop", prompt="print the token", directory=str(work))["task_id"]
        wait_state(home, tid, "WaitingForUser")
        k.terminate()
    results = rows(home, "SELECT status, result_json FROM task_steps WHERE task_id = ?", tid)
    assert [r["status"] for r in results] == ["completed"] * len(COMMANDS)
    for row in results:  # each command's output reached the journal, redacted
        assert "[REDACTED:api_token]" in json.loads(row["result_json"])["text"], row["result_json"]
    (answer,) = rows(
        home,
        "SELECT body_json FROM loop_turns WHERE task_id = ? AND kind = 'assistant' "
        "ORDER BY seq DESC LIMIT 1",
        tid,
    )
    assert "I saw:" in answer[0] and "[REDACTED:api_token]" in answer[0]
    assert _leaks(home) == []


def test_the_forms_checked_are_what_the_commands_print(tmp_path: Path) -> None:
    """The forms `_leaks` looks for are the commands' real output (so a leak is found)."""
    (tmp_path / "token.txt").write_text(SECRET + "\n")
    printed = "".join(
        subprocess.run(
            c, shell=True, cwd=tmp_path, capture_output=True, text=True, check=True
        ).stdout
        for c in COMMANDS
    )
    flat = printed.upper().replace("\n", "")
    for what, form in _forms().items():
        if what == "as is":
            continue
        assert form.upper() in flat or form.upper() in printed.upper(), what
