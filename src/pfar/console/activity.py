"""The console's /activity page: cost and activity over the last days as charts (drawn
by the vendored uPlot from figures embedded in the page) and as tables of the same
figures, and the benchmark's figures when the home keeps a run of them."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from ..errors import BadRequest
from ..kernel.api.wire import wire_json

if TYPE_CHECKING:
    from .app import Console

CHOICES = (7, 30, 90, 365)  # the windows the page offers (any of 1 to 366 is taken)
# `python -m bench.run --json` prints one JSON object a figure: kept in the home, the
# page shows the last run's throughput
BENCH_FILE = "bench-results.jsonl"
BENCH_COMMAND = (
    f'.venv/bin/python -m bench.run --json | grep \'^{{"kind"\' > "$PFAR_HOME/{BENCH_FILE}"'
)


class BenchResult(BaseModel):
    """One measured figure of a benchmark run (bench/common.py's `Result`)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    mode: str
    steps_per_s: float
    tasks: int = 0
    concurrency: int = 1
    note: str = ""


@dataclass(frozen=True, slots=True)
class BenchFigures:
    """The benchmark's figures the home keeps, and its lines that are no figure."""

    path: Path
    results: tuple[BenchResult, ...]
    unread: int


BENCH_MOST_BYTES = 256 * 1024


def bench_figures(home_root: Path) -> BenchFigures | None:
    """The run kept in the home (None when there is none)."""
    path = home_root / BENCH_FILE
    try:
        with path.open("rb") as f:  # a run is a few dozen lines: what is beyond is not
            text = f.read(BENCH_MOST_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    results: list[BenchResult] = []
    unread = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            unread += 1
            continue
        if not isinstance(value, dict) or value.get("kind") != "Result":
            continue  # another kind of figure (recovery, memory): not a throughput
        try:
            results.append(BenchResult.model_validate(value))
        except ValidationError:
            unread += 1
    return BenchFigures(path, tuple(results), unread)


def _days(request: Request) -> int:
    text = request.query_params.get("days", "30")
    try:
        return int(text)
    except ValueError:
        raise BadRequest("days", f"must be a whole number of days, not {text!r}") from None


async def activity_page(console: Console, request: Request) -> Response:
    days = _days(request)
    found = await console.operator.activity(days)
    return console.render(
        request,
        "activity.html",
        activity=found,
        data=wire_json(found),
        days=days,
        choices=sorted({*CHOICES, days}),
        bench=await asyncio.to_thread(bench_figures, console.operator.home.root),
        bench_file=BENCH_FILE,
        bench_command=BENCH_COMMAND,
    )
