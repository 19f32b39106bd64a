"""`pfar providers`: the model providers, each one's role and circuit breaker."""

from __future__ import annotations

import click
from rich.table import Table

from ..kernel.api.arguments import NoArgs
from ..kernel.api.providers_view import PROVIDERS, ProviderView
from .output import ask, emit, home_of, out

_STATES = {
    "closed": "up",
    "open": "down",
    "half_open": "probing",
    "not running": "not running",
}


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def providers(ctx: click.Context, as_json: bool) -> None:
    """The model providers: up, down (calls fail over or wait) or probing, each one's
    failures in a row and its last error (docs/providers.md). Breakers live in the
    kernel's memory: with no kernel running, the configured providers are listed."""
    found = ask(home_of(ctx), PROVIDERS, NoArgs(), lambda r: r.providers())
    if as_json:
        emit(found, True)
        return
    table = Table(title_justify="left")
    for column in ("provider", "role", "state", "failures", "next call", "last error"):
        table.add_column(column)
    for p in found:
        table.add_row(
            p.name,
            p.role,
            _STATES.get(p.state, p.state),
            str(p.failures) if p.state != "not running" else "",
            _next_call(p),
            p.last_error or "",
        )
    out.print(table)


def _next_call(p: ProviderView) -> str:
    if p.state in ("closed", "not running"):
        return ""
    if p.retry_in_seconds is None:
        return "when the probe answers"
    return f"in {p.retry_in_seconds:g} s" if p.retry_in_seconds else "now (it probes)"
