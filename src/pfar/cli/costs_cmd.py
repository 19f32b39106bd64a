"""`pfar costs`: what model calls cost, by day, model, template or task."""

from __future__ import annotations

import click

from ..errors import BadRequest
from ..journal.costs_sql import COSTS_BY
from ..kernel.api.arguments import CostsArgs
from ..kernel.api.costs import CostLine, Costs
from ..kernel.api.requests import COSTS
from .output import ask, emit, home_of, out


@click.command()
@click.option("--by", "by", type=click.Choice(COSTS_BY), default="day", show_default=True)
@click.option("--since", help="The first UTC day counted (YYYY-MM-DD); default: the first call.")
@click.option("--until", help="The last UTC day counted (YYYY-MM-DD), included; default: today.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def costs(ctx: click.Context, by: str, since: str | None, until: str | None, as_json: bool) -> None:
    """What model calls cost: tokens in and out and US dollars, by day, model,
    template or task; the models with no price are named (their cost is unknown).

    \b
    Example:
        pfar costs --by model --since 2030-05-01
    """
    try:
        found = ask(
            home_of(ctx),
            COSTS,
            CostsArgs(by, since, until),
            lambda r: r.costs(by, since, until),
        )
    except BadRequest as exc:
        raise click.BadParameter(exc.problem, param_hint=f"--{exc.field}") from None
    if as_json:
        emit(found, True)
        return
    for line in lines(found):
        out.print(line, markup=False, highlight=False)


def lines(c: Costs) -> list[str]:
    """The table for people: one line a group, then the total."""
    window = f"{c.since or 'the first call'} to {c.until or 'today'} (UTC)"
    if not c.lines:
        return [f"no model calls from {window}"]
    key = c.by
    width = max(len(key), len("total"), *(len(_key(c.by, ln)) for ln in c.lines))
    head = f"{key:<{width}}  {'calls':>6}  {'tokens in':>11}  {'tokens out':>11}  {'cost':>10}"
    out_lines = [f"model calls from {window}, by {c.by}", head]
    out_lines += [_row(_key(c.by, ln), ln, width) for ln in c.lines]
    out_lines.append(_row("total", c.total, width))
    if c.unpriced_models:
        out_lines.append(
            f"{c.total.unpriced_calls} call(s) had no price, their cost is unknown (not in "
            f"the dollars above): {', '.join(c.unpriced_models)}; price them with "
            "[llm.prices.MODEL] in config.toml"
        )
    return out_lines


def _key(by: str, line: CostLine) -> str:
    if line.key is None:  # by template: calls whose task is gone
        return "(task gone)"
    return line.key[:8] if by == "task" else line.key


def _row(key: str, ln: CostLine, width: int) -> str:
    # "+?": some of its calls had no price; "unknown": none had one
    cost = f"${ln.cost_usd:,.4f}" + ("+?" if ln.unpriced_calls else "")
    if ln.unpriced_calls == ln.calls:
        cost = "unknown"
    return (
        f"{key:<{width}}  {ln.calls:>6,}  {ln.input_tokens:>11,}  "
        f"{ln.output_tokens:>11,}  {cost:>10}"
    )
