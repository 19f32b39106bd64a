"""The console's /activity page and `POST /api/activity`, against a real kernel process
whose task made real model calls (an OpenAI-compatible loopback server, priced): the
calls' tokens and cost are on the page and in the op's record; bad input is refused
naming `days`; the page needs the owner's session."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from ..console_support import CONSOLE_CONFIG, console_url, logged_in, owner_token, serving
from ..support import make_home, pfar, wait_for
from .openai_server import OpenAIServer, Stream, text_stream
from .test_model_pipeline import META, PLAN, _tool_stream

DATA = re.compile(r'<script type="application/json" id="activity-data">(.*?)</script>', re.S)


def _priced_home(root: Path, server: OpenAIServer) -> Any:
    llm = f"""
[llm]
provider = "openai"
model = "gpt-test"
base_url = "{server.base_url}"
[llm.prices.gpt-test]
input = 1.0
output = 2.0
"""
    home = make_home(root, config=CONSOLE_CONFIG + llm, examples=True)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("openai_api_key", "sk-test-key-123456")
    store.close()
    return home


def test_a_tasks_model_calls_are_charted_and_tabled_and_bad_days_are_refused(
    tmp_path: Path,
) -> None:
    server = OpenAIServer()
    try:
        server.script(
            Stream(_tool_stream("record_metadata", META)),
            Stream(_tool_stream("submit_plan", PLAN)),
            Stream(text_stream("Saved ", "your note.")),
        )
        home = _priced_home(tmp_path / "home", server)
        with serving(home):
            url = console_url(home)
            anonymous = httpx.Client(base_url=url, follow_redirects=False, timeout=20)
            page = anonymous.get("/activity")
            assert (page.status_code, page.headers["location"]) == (303, "/login")

            submitted = pfar(home, "submit", "note", "remember to buy milk")
            assert submitted.returncode == 0, submitted.stderr
            api = httpx.Client(base_url=url, timeout=20)
            owner = {"authorization": f"Bearer {owner_token(home)}"}

            def done() -> bool:
                listed = api.post("/api/tasks", json={}, headers=owner).json()["result"]
                return bool(listed) and listed[0]["state"] == "Completed"

            wait_for(done, what="the note task to complete")
            answer = api.post("/api/activity", json={"days": 7}, headers=owner)
            assert answer.status_code == 200, answer.text
            record = answer.json()["result"]
            today = datetime.now(UTC).date().isoformat()
            assert len(record["days"]) == 7 and record["days"][-1]["day"] == today
            assert [d["day"] for d in record["days"]] == sorted(d["day"] for d in record["days"])
            last = record["days"][-1]
            assert (last["tasks"], last["tasks_by_kind"]["pipeline"], last["steps"]) == (1, 1, 1)
            assert last["calls"] == 3 and last["input_tokens"] == 210  # 100 + 100 + the text's 10
            assert last["output_tokens"] > 0 and last["cost_usd"] > 0
            assert all(d["calls"] == 0 and d["cost_usd"] == 0 for d in record["days"][:-1])
            (model,) = record["models"]
            assert (model["provider"], model["model"], model["calls"]) == ("openai", "gpt-test", 3)
            (template,) = record["templates"]
            assert (template["template_id"], template["cost_usd"]) == ("note", last["cost_usd"])
            default = api.post("/api/activity", json={}, headers=owner).json()["result"]
            assert len(default["days"]) == 30

            refusals = [(0, "must be 1 to 366"), ("x", "must be an integer")]
            refusals += [(10000, "must be 1 to 366"), (True, "must be an integer")]
            for bad, problem in refusals:
                refused = api.post("/api/activity", json={"days": bad}, headers=owner)
                error = refused.json()["error"]
                assert (refused.status_code, error["code"]) == (400, "bad_request"), bad
                assert error["message"].startswith(f"days: {problem}"), error

            client = logged_in(home)
            page = client.get("/activity")
            assert page.status_code == 200
            assert 'href="/activity" aria-current="page"' in page.text
            assert "/static/vendor/uplot/uPlot.iife.min.js" in page.text
            assert "openai/gpt-test" in page.text and "note" in page.text
            found = DATA.search(page.text)
            assert found is not None
            embedded = json.loads(found.group(1))
            assert embedded["days"][-1]["calls"] == 3 and len(embedded["days"]) == 30
            assert "No benchmark run is kept in this home" in page.text
            assert "bench.run --json" in page.text
            assert len(client.get("/activity?days=7").text) < len(page.text)
            for bad in ("0", "x", "10000"):
                refused_page = client.get(f"/activity?days={bad}")
                assert refused_page.status_code == 400 and "days: " in refused_page.text, bad

            figure = {"kind": "Result", "name": "pfar", "mode": "sequential", "steps": 10}
            figure |= {"seconds": 0.5, "steps_per_s": 1234.5, "tasks": 10}
            (home.root / "bench-results.jsonl").write_text(
                json.dumps(figure) + "\nnot json\n" + json.dumps({"kind": "Memory"}) + "\n"
            )
            page = client.get("/activity")
            assert "1234" in page.text and "sequential" in page.text
            assert "1 line(s) that are no figure left out" in page.text
            # the key never reached a page
            assert "sk-test-key-123456" not in page.text
    finally:
        server.close()
