"""A loop task's conversation on its console page, against a real kernel process: its
turns (model output escaped, long ones folded), followed over server-sent events from
a turn's number, and the `conversation` op over HTTP."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import httpx

from pfar.vault.home import Home

from ..console_support import CONSOLE_CONFIG, console_url, logged_in, owner_token, serving
from ..support import make_home, pfar, wait_for

LOOP = '[loop]\ntools = ["file.write"]\nalways_allow = ["file.write"]\n'
LONG = "x" * 900
SCRIPT = textwrap.dedent(
    f"""
    [[turns]]
    turn = 1
    text = "Writing <i>a.txt</i>."
    tool_calls = [ {{ name = "file.write", input = {{ path = "a.txt", content = "{LONG}" }} }} ]

    [[turns]]
    text = "Done <script>alert('pwned')</script>"
    """
)


def _home(root: Path) -> Home:
    return make_home(root, config=CONSOLE_CONFIG + LOOP, script=SCRIPT, examples=True)


def _events(text: str) -> list[tuple[str | None, str, dict[str, object]]]:
    """The (id, event, data) of each server-sent event in `text`."""
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
    return out


def test_a_loop_tasks_page_shows_its_conversation_escaped_and_follows_it(tmp_path: Path) -> None:
    home = _home(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    with serving(home) as kernel:
        started = kernel.request("loop", prompt="write a.txt", directory=str(work), once=True)
        task_id = started["task_id"]
        client = logged_in(home)
        wait_for(
            lambda: kernel.request("task_show", task_id=task_id)["task"]["state"] == "Completed",
            what="the loop task to end",
        )

        page = client.get(f"/tasks/{task_id}")
        assert page.status_code == 200
        html = page.text
        assert 'id="conversation"' in html and "/static/conversation.js" in html
        assert "Done &lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in html
        assert "<script>alert" not in html and "<i>a.txt</i>" not in html
        assert "Writing &lt;i&gt;a.txt&lt;/i&gt;." in html
        assert "<strong>file.write</strong>" in html
        # the long arguments are folded, whole inside
        assert "<details><summary>arguments (" in html and LONG in html
        said = html[html.index('id="conversation"') :]
        assert said.index("write a.txt") < said.index("Writing &lt;i&gt;") < said.index("Done &lt;")

        # followed from the start: every turn by its number, the state, the end
        live = client.get(f"/tasks/{task_id}/conversation/live")
        assert live.status_code == 200
        assert live.headers["content-type"].startswith("text/event-stream")
        events = _events(live.text)
        turns = [(i, d) for i, e, d in events if e == "turn"]
        assert [i for i, _ in turns] == ["0", "1", "2", "3"]
        assert [d["kind"] for _, d in turns] == ["user", "assistant", "results", "assistant"]
        last = turns[-1][1]
        assert "&lt;script&gt;" in str(last["html"]) and "<script>" not in str(last["html"])
        assert last["turn"]["text"] == "Done <script>alert('pwned')</script>"  # type: ignore[index]
        assert ("state", {"state": "Completed"}) in [(e, d) for _, e, d in events]
        assert events[-1][1] == "ended"

        # a browser that reconnects says the last turn it showed
        again = _events(
            client.get(f"/tasks/{task_id}/conversation/live", headers={"last-event-id": "2"}).text
        )
        assert [i for i, e, _ in again if e == "turn"] == ["3"]
        assert client.get(f"/tasks/{task_id}/conversation/live?after=3").status_code == 200
        bad = client.get(f"/tasks/{task_id}/conversation/live?after=two")
        assert bad.status_code == 400 and "after" in bad.text
        assert client.get("/tasks/0badc0de/conversation/live").status_code == 404

        # a pipeline task has a timeline, no conversation
        note = pfar(home, "submit", "note", "buy milk")
        assert note.returncode == 0, note.stderr
        listed = kernel.request("tasks", limit=5)
        note_id = next(t["task_id"] for t in listed if t["template_id"] == "note")
        assert 'id="conversation"' not in client.get(f"/tasks/{note_id}").text
        refused = client.get(f"/tasks/{note_id}/conversation/live")
        assert refused.status_code == 400 and "only a loop task" in refused.text

        # the op over HTTP, with the owner token as a bearer
        api = httpx.Client(base_url=console_url(home), timeout=20)
        owner = {"authorization": f"Bearer {owner_token(home)}"}
        answer = api.post("/api/conversation", json={"task_id": task_id, "after": 1}, headers=owner)
        assert answer.status_code == 200
        result = answer.json()["result"]
        assert (result["state"], [t["seq"] for t in result["turns"]]) == ("Completed", [2, 3])
        not_loop = api.post("/api/conversation", json={"task_id": note_id}, headers=owner)
        assert (not_loop.status_code, not_loop.json()["error"]["code"]) == (400, "not_a_loop_task")
        unknown = api.post("/api/conversation", json={"task_id": "0badc0de"}, headers=owner)
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_task")
