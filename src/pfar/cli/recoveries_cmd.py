"""`pfar recoveries`: every kept start's recovery report, newest first, with its tasks."""

from __future__ import annotations

import click

from ..journal.boot_reports import StoredReport
from ..kernel.api.arguments import RecoveriesArgs
from ..kernel.api.records import BootRecovery
from ..kernel.api.requests import RECOVERIES
from .output import ask, emit, home_of, out


@click.command()
@click.option("--limit", default=20, show_default=True, help="How many starts, newest first.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recoveries(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Each start's recovery report as the owner was sent it, newest first.

    \b
    Example:
        pfar recoveries --limit 5
    """
    found = ask(home_of(ctx), RECOVERIES, RecoveriesArgs(limit), lambda r: r.recoveries(limit))
    if as_json:
        emit(found, True)
        return
    if not found:
        out.print("no start is kept yet")
        return
    for boot in found:
        out.print(_heading(boot), markup=False, highlight=False)
        report = boot.report
        if report is None:
            said = "  (no report kept: this start is from before reports were kept)"
        elif isinstance(report, StoredReport):
            said = "\n".join(f"  {line}" for line in report.text.splitlines())
            for line in report.lines:
                if line.task_ids:
                    said += f"\n    {line.kind}: {' '.join(t[:8] for t in line.task_ids)}"
        else:
            said = f"  (its report is kept in a form this pfar cannot read: {report.problem})"
        out.print(said, markup=False, highlight=False)


def _heading(boot: BootRecovery) -> str:
    started = boot.started_at[:19].replace("T", " ")
    before = {
        "clean": "after a clean stop",
        "killed": "after the kernel before it was killed",
        None: "the first start kept",
    }[boot.after]
    now = "running now" if boot.running else "ended cleanly" if boot.clean else "killed"
    return f"boot {boot.boot_id[:8]}  started {started} UTC, {before}; {now}"
