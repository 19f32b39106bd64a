"""`pfar`: the command line. Tables for people, `--json` for scripts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import KernelNotRunning, PfarError
from ..kernel.setup_home import init_home
from ..policy.printable import printable
from ..vault.home import Home
from .approvals_cmd import answer, approval, approvals, approve, credential, deny
from .audit_cmd import audit
from .channels_cmd import channels
from .console_cmd import console
from .costs_cmd import costs
from .events_cmd import events
from .holds_cmd import cancel, pause, resume
from .hooks_cmd import hooks
from .learnings_cmd import learnings
from .locks_cmd import locks
from .loops_cmd import attach, context_cmd, loop, retry_cmd, send
from .mcp_cmd import mcp
from .output import emit, err, home_of, out, read, table
from .providers_cmd import providers
from .queue_cmd import queue
from .recoveries_cmd import recoveries
from .reload_cmd import reload
from .run_cmd import run
from .sessions_cmd import secret, session
from .skills_cmd import skills
from .tasks_cmd import submit, task, tasks
from .vault_cmd import vault
from .workflows_cmd import workflow


# user data is never markup; piped output is not squeezed into 80 columns
@click.group()
@click.option(
    "--home",
    "home_dir",
    envvar="PFAR_HOME",
    type=click.Path(file_okay=False),
    help="The kernel's home (default: $PFAR_HOME or ~/.pfar).",
)
@click.version_option(package_name="pfar")
@click.pass_context
def cli(ctx: click.Context, home_dir: str | None) -> None:
    """pfar: a personal agent kernel that never loses work."""
    ctx.obj = {"home": Home.from_env(home_dir)}


@cli.command()
@click.option(
    "--keychain", "choice", flag_value="keychain", help="Keep the vault's key in the OS keychain."
)
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Keep the vault's key in this new file (owner-only, outside the home).",
)
@click.option(
    "--passphrase",
    "choice",
    flag_value="passphrase",
    help="Keep no key: stretch it from a passphrase at every start (terminal, or the file "
    "descriptor in PFAR_PASSPHRASE_FD).",
)
@click.option(
    "--no-encrypt", "choice", flag_value="none", help="A plain, unencrypted vault (not advised)."
)
@click.option(
    "--postgres",
    "dsn",
    metavar="DSN",
    help="Keep the journal on this PostgreSQL server (a DSN or URL without a password); "
    "secrets and learnings stay in the local vault.",
)
@click.option(
    "--password-env",
    metavar="VAR",
    help="With --postgres: the server's password is in environment variable VAR.",
)
@click.option(
    "--password-secret",
    metavar="NAME",
    help="With --postgres: keep the server's password in the vault as secret NAME (read "
    "from stdin, or a hidden prompt).",
)
@click.pass_context
def init(
    ctx: click.Context,
    choice: str | None,
    key_file: Path | None,
    dsn: str | None,
    password_env: str | None,
    password_secret: str | None,
) -> None:
    """Create a home: config.toml, an encrypted vault, example templates and a model script.

    The vault's key goes to the OS keychain where there is one, else to a key file
    outside the home (printed); `--key-file`, `--passphrase` or `--no-encrypt` choose.
    `--postgres DSN` keeps the journal on a PostgreSQL server instead of the vault."""
    from .vault_cmd import init_choice, postgres_init, say_where_the_key_went

    home = home_of(ctx)
    encryption, passphrase = init_choice(choice, key_file)
    postgres = postgres_init(dsn, password_env, password_secret)
    for path in init_home(
        home,
        encryption=encryption,
        key_file=key_file,
        passphrase=passphrase,
        postgres=postgres,
    ):
        out.print(f"created {path}")
    say_where_the_key_went(home, asked=choice or ("file" if key_file else None))
    out.print(f"\nhome ready: {home.root}\nnext: pfar --home {home.root} run")


@cli.command()
@click.option(
    "--dry-run",
    is_flag=True,
    required=True,
    help="Show what recovery would do without changing anything.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recover(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """What recovery would do with every unfinished task (changes nothing)."""
    preview = read(home_of(ctx), lambda r: r.recovery_preview())
    data = preview.to_json()
    if as_json:
        emit(data, True)
        return
    rows = data["decisions"]
    if preview.kernel_running:
        out.print(
            "a kernel is running on this home: it recovered at its start; "
            "this is what a restart now would do"
        )
    out.print(
        table(
            rows,
            ["task_id", "template_id", "state", "current_step", "action", "reason"],
            f"{len(rows)} unfinished task(s)",
        )
    )


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the demo's home afterwards.")
def demo(keep: bool) -> None:
    """Crash-recovery showcase: SIGKILL a kernel mid-work, restart it, prove nothing repeats."""
    from .demo import run_demo

    sys.exit(run_demo(keep=keep))


cli.add_command(run)
cli.add_command(console)
cli.add_command(submit)
cli.add_command(recoveries)
cli.add_command(costs)
cli.add_command(tasks)
cli.add_command(task)
cli.add_command(approvals)
cli.add_command(approval)
cli.add_command(approve)
cli.add_command(deny)
cli.add_command(answer)
cli.add_command(credential)
task.add_command(context_cmd)
task.add_command(retry_cmd)
cli.add_command(loop)
cli.add_command(channels)
cli.add_command(events)
cli.add_command(learnings)
cli.add_command(queue)
cli.add_command(hooks)
cli.add_command(locks)
cli.add_command(skills)
cli.add_command(attach)
cli.add_command(send)
cli.add_command(cancel)
cli.add_command(vault)
cli.add_command(pause)
cli.add_command(resume)
cli.add_command(workflow)
cli.add_command(session)
cli.add_command(secret)
cli.add_command(reload)
cli.add_command(audit)
cli.add_command(mcp)
cli.add_command(providers)


def main() -> None:
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KernelNotRunning as exc:
        err.print(f"error: {printable(str(exc), indent='  ')}")
        sys.exit(2)
    except PfarError as exc:
        err.print(f"error: {printable(str(exc), indent='  ')}")
        sys.exit(1)
