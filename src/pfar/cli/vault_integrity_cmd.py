"""`pfar vault check` and `pfar vault accept-loss`: the start's vault checks, run by hand
(docs/vault.md, "Integrity checks at start" and "A vault that went back in time")."""

from __future__ import annotations

import json
import os

import click

from ..config import Config
from ..kernel import vault_start
from ..kernel.audit import AuditLog
from ..policy.redact import Redactor
from ..vault import integrity, keys
from ..vault.home import HomeLock
from .output import emit, home_of, out


@click.command("check")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Check the vault's databases as a start does (quick_check, and every page's HMAC
    when encrypted); read-only. Exit 1 when damage is found."""
    home = home_of(ctx)
    result = integrity.check_vault(home.vault_dir, keys.unlock(home))
    if not HomeLock(home).is_held_elsewhere():  # a running kernel's own check stays shown
        vault_start.keep_check(home, result)
    if as_json:
        emit(result.to_json(), True)
    else:
        for name, f in result.files.items():
            said = "ok" if f.ok else "DAMAGED: " + "; ".join(f.findings)
            out.print(f"{name}: {said} ({', '.join(f.checks)}, {f.seconds:.2f} s)", soft_wrap=True)
    damaged = result.refusal(home.vault_dir)
    if damaged is not None:
        raise damaged


@click.command("accept-loss")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def accept_loss(ctx: click.Context, as_json: bool) -> None:
    """Run on with a journal that lost acknowledged work: journal what was lost (the
    next start reports it) and make the record of acknowledged work start from the
    journal as it is. Refused while a kernel runs."""
    home = home_of(ctx)
    config = Config.load(home.config)
    key = keys.unlock(home)
    lock = HomeLock(home)
    lock.acquire()  # no kernel starts (or runs) on the home meanwhile
    try:
        accepted = vault_start.accept_loss(
            home, key, config.vault.synchronous, f"uid {os.getuid()}"
        )
    finally:
        lock.release()
    if accepted is None:
        said = (
            "nothing to accept: the journal is not behind what the kernel acknowledged "
            f"({home.vault_dir / 'acknowledged'}); nothing was changed"
        )
        if as_json:
            click.echo(json.dumps({"accepted": False, "message": said}))
        else:
            out.print(said, soft_wrap=True)
        return
    audit = AuditLog(home.audit_log, Redactor())
    audit.log(
        "vault_loss_accepted",
        seq=accepted.seq,
        events=[accepted.first, accepted.last],
        tasks=accepted.tasks,
        unreadable=accepted.unreadable,
        by=f"uid {os.getuid()}",
    )
    audit.close()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "accepted": True,
                    "seq": accepted.seq,
                    "events": [accepted.first, accepted.last],
                    "tasks": accepted.tasks,
                }
            )
        )
    else:
        out.print(vault_start.accepted_text(accepted), soft_wrap=True)
