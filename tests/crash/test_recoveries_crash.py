"""Every restart's recovery report, kept with its boot: a kernel killed twice with a
task parked on the owner lists three starts, the later two naming the task, over the
control socket, the CLI, the HTTP API and the console's Recoveries page; a boot whose
report was never kept (a journal from before schema 14) lists without one."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from pfar.cli.client import RemoteError
from pfar.journal import Journal
from pfar.journal.boot_reports import ReportLineKind
from pfar.journal.store import Store
from pfar.journal.tx import Tx
from pfar.kernel.api.records import BootRecovery
from pfar.kernel.api.requests import RECOVERIES

from ..console_support import console_home, console_url, logged_in, owner_token, serving
from ..support import KernelProcess, pending_approvals, pfar, wait_for, write_journal

pytestmark = pytest.mark.both_backends


def _boots(kernel: KernelProcess, limit: int = 20) -> list[BootRecovery]:
    return RECOVERIES.reply.parse(kernel.request("recoveries", limit=limit), "recoveries")


def test_every_restart_keeps_its_report_naming_the_parked_task(tmp_path: Path) -> None:
    home = console_home(tmp_path / "home")
    first = KernelProcess(home)
    first.wait_ready()
    submitted = pfar(home, "submit", "run_command", "echo hello", "--json")
    assert submitted.returncode == 0, submitted.stderr
    task_id = json.loads(submitted.stdout)["task_id"]
    wait_for(lambda: pending_approvals(home), what="the task to ask the owner")
    first.kill()
    again = KernelProcess(home)  # restarted, and killed again with the task still parked
    again.wait_ready()
    again.kill()

    with serving(home) as kernel:
        boots = _boots(kernel)
        assert len(boots) == 3
        newest, killed, oldest = boots
        assert newest.running and newest.after == "killed"
        assert oldest.after is None and oldest.report is not None
        assert oldest.report.form == "report" and oldest.report.text == (
            "System restarted. No pending tasks to recover."
        )
        for boot in (newest, killed):
            assert boot.report is not None and boot.report.form == "report", boot
            assert boot.after == "killed" and task_id in boot.report.tasks
            (line,) = [x for x in boot.report.lines if task_id in x.task_ids]
            assert line.kind is ReportLineKind.approval_resent
            assert f" - {line.text}" in boot.report.text.splitlines()
        assert not killed.running and not killed.clean and killed.ended_at is None
        assert [b.boot_id for b in _boots(kernel, limit=2)] == [b.boot_id for b in boots[:2]]
        with pytest.raises(RemoteError, match="limit: must be 1 to 1000, not 0") as refused:
            kernel.request("recoveries", limit=0)
        assert refused.value.remote_code == "bad_request"

        # the console: the page lists every start, and links the task from its lines
        client = logged_in(home)
        page = client.get("/recoveries")
        assert page.status_code == 200, page.text
        assert page.text.count('class="boot"') == 3
        assert f'href="/tasks/{task_id}"' in page.text
        assert "the kernel was killed" in page.text and "running now" in page.text
        assert 'href="/recoveries"' in client.get("/").text  # from the Needs-you page
        for bad in ("abc", "0", "1001"):
            refused_page = client.get(f"/recoveries?limit={bad}")
            assert refused_page.status_code == 400 and "limit" in refused_page.text
        api = httpx.Client(base_url=console_url(home), timeout=20)
        owner = {"authorization": f"Bearer {owner_token(home)}"}
        answer = api.post("/api/recoveries", json={"limit": 3}, headers=owner)
        assert answer.status_code == 200, answer.text
        over_http = RECOVERIES.reply.parse(answer.json()["result"], "recoveries")
        assert over_http == boots[:3]
        too_many = api.post("/api/recoveries", json={"limit": 5000}, headers=owner)
        assert too_many.status_code == 400 and "limit" in too_many.text

    # the first start's report, as a journal from before schema 14 has it: none
    async def forget(store: Store) -> None:
        def op(conn: Tx) -> None:
            conn.execute(
                "UPDATE kernel_boots SET report_json = NULL WHERE boot_id = ?", (oldest.boot_id,)
            )

        assert isinstance(store, Journal)
        await store._db.write(op, None)

    write_journal(home, forget)
    shown = pfar(home, "recoveries", "--json")  # no kernel runs: read from the journal
    assert shown.returncode == 0, shown.stderr
    offline = RECOVERIES.reply.parse(json.loads(shown.stdout), "recoveries")
    assert [b.boot_id for b in offline] == [b.boot_id for b in boots]
    assert offline[0].clean and not offline[0].running  # it stopped cleanly since
    assert offline[-1].report is None and offline[1].report == boots[1].report
    printed = pfar(home, "recoveries", "--limit", "3")
    assert printed.returncode == 0, printed.stderr
    assert "from before reports were kept" in printed.stdout
    assert task_id[:8] in printed.stdout and "was killed" in printed.stdout
    wrong = pfar(home, "recoveries", "--limit", "0")
    assert wrong.returncode != 0 and "limit" in wrong.stderr
