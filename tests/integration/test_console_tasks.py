"""The console's task list over HTTP, against a real kernel process: the filter form
narrows the list, the Older link pages through it, bad parameters are refused by
name, and a row's action is taken once."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from ..console_support import console_home, csrf_of, logged_in, serving
from ..support import pending_approvals, pfar, wait_for


def _listed(page: str) -> list[str]:
    """The task ids a list page shows, in its order."""
    return re.findall(r'<td><a href="/tasks/([0-9a-f-]{36})">', page)


def _get(client: httpx.Client, url: str) -> str:
    answer = client.get(url)
    assert answer.status_code == 200, (url, answer.text)
    return answer.text


def test_the_list_filters_pages_and_acts_once(tmp_path: Path) -> None:
    home = console_home(tmp_path / "home")
    texts = ["echo alpha 50%", "echo beta_1", "echo gamma ÉCOLE"]
    with serving(home):
        client = logged_in(home)
        for text in texts:
            submitted = pfar(home, "submit", "run_command", text)
            assert submitted.returncode == 0, submitted.stderr
        wait_for(lambda: len(pending_approvals(home)) == 3, what="the three questions")
        every = _listed(_get(client, "/tasks"))
        assert len(every) == 3
        gamma, beta, alpha = every  # newest first

        # each filter narrows the list
        assert _listed(_get(client, "/tasks?text=ALPHA")) == [alpha]
        assert _listed(_get(client, "/tasks?text=%25")) == [alpha]  # a literal %
        assert _listed(_get(client, "/tasks?text=a_1")) == [beta]
        assert _listed(_get(client, "/tasks?text=%C3%A9cole")) == [gamma]  # école
        assert _listed(_get(client, "/tasks?template=run_command&kind=pipeline")) == every
        assert _listed(_get(client, "/tasks?template=note")) == []
        assert _listed(_get(client, "/tasks?kind=loop")) == []
        assert _listed(_get(client, "/tasks?state=AwaitingApproval")) == every
        today = datetime.now(UTC).date()
        around = f"since={today - timedelta(days=1)}&until={today}"
        assert _listed(_get(client, f"/tasks?{around}")) == every
        assert _listed(_get(client, f"/tasks?since={today + timedelta(days=1)}")) == []
        # empty fields (a form sent as it is) filter nothing
        assert _listed(_get(client, "/tasks?state=&kind=&template=&since=&until=&text=")) == every

        # the CLI reads the same list, and says how to get its next page
        cli = pfar(home, "tasks", "--text", "alpha", "--json")
        assert cli.returncode == 0, cli.stderr
        assert [t["task_id"] for t in json.loads(cli.stdout)] == [alpha] and not cli.stderr
        paged = pfar(home, "tasks", "--kind", "pipeline", "--limit", "2")
        assert paged.returncode == 0, paged.stderr
        more = re.search(r"more: pfar tasks --kind pipeline --limit 2 --after (\S+)", paged.stderr)
        assert more is not None, paged.stderr
        rest = pfar(home, "tasks", "--kind", "pipeline", "--after", more.group(1), "--json")
        assert [t["task_id"] for t in json.loads(rest.stdout)] == [alpha] and not rest.stderr
        bad = pfar(home, "tasks", "--since", "soon")
        assert bad.returncode != 0 and "--since" in bad.stderr, bad.stderr
        bad = pfar(home, "tasks", "--after", "x")
        assert bad.returncode != 0 and "--after" in bad.stderr, bad.stderr

        # the Older link carries the filter and the cursor, and the last page has none
        first = _get(client, "/tasks?state=AwaitingApproval&limit=2")
        assert _listed(first) == [gamma, beta]
        older = re.search(r'<a href="([^"]+)" rel="next">Older</a>', first)
        assert older is not None
        link = older.group(1).replace("&amp;", "&")
        assert "state=AwaitingApproval" in link and "limit=2" in link and "cursor=" in link
        last = _get(client, link)
        assert _listed(last) == [alpha] and 'rel="next"' not in last and "Newest" in last

        # bad parameters: the 400 page names the field, and nothing is listed
        for query, field in (
            ("state=Done", "state"),
            ("kind=robot", "kind"),
            ("since=yesterday", "since"),
            ("until=2030-02-30", "until"),
            ("cursor=not-a-cursor", "cursor"),
            ("cursor=" + link.split("cursor=")[1][:-4], "cursor"),  # cut short
            ("limit=0", "limit"),
            ("limit=%C2%B2", "limit"),  # "²": a digit, but not a number int() reads
            ("text=" + "x" * 201, "text"),
        ):
            refused = client.get(f"/tasks?{query}")
            assert refused.status_code == 400, query
            assert f"{field}: " in refused.text, (query, refused.text)

        assert client.get("/tasks?until=9999-12-31").status_code == 200  # the last day there is

        # a row offers what its state allows; its form acts once, back to the list
        listed = _get(client, "/tasks?text=beta")
        row = listed[listed.index(f'action="/tasks/{beta}/cancel"') :]
        assert f'formaction="/tasks/{beta}/cancel"' in row
        assert f'/tasks/{beta}/pause"' not in listed  # a task waiting for its answer
        form = {"csrf": csrf_of(row), "back": "/tasks?text=beta"}
        done = client.post(f"/tasks/{beta}/cancel", data=form)
        assert done.status_code == 303, done.text
        assert done.headers["location"].startswith("/tasks?text=beta&said=task")
        assert "Cancelled" in _get(client, done.headers["location"])
        replayed = client.post(f"/tasks/{beta}/cancel", data=form)
        assert replayed.status_code == 403 and "sent already" in replayed.text
        assert _listed(_get(client, "/tasks?state=Cancelled")) == [beta]
        ended = _get(client, "/tasks?state=Cancelled")
        assert f"/tasks/{beta}/cancel" not in ended  # an ended task offers nothing
        # a back that is not the list is not followed
        elsewhere = {"csrf": csrf_of(_get(client, "/tasks?text=alpha")), "back": "//evil/"}
        moved = client.post(f"/tasks/{alpha}/cancel", data=elsewhere)
        assert moved.status_code == 303 and moved.headers["location"].startswith(f"/tasks/{alpha}")
