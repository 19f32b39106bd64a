"""pfar and DBOS on the same PostgreSQL server, in the same run, beside its floor.

The workload of the SQLite table (tasks of 10 trivial steps, each durable before the
next): one task at a time, 64 at once, and recovery of 1,000 tasks SIGKILLed inside
step 5 (spawn of a new process until all Completed). pfar's journal and DBOS's system
database each get a fresh database on the server per measurement, dropped after.
Runs are interleaved (floor, then pfar and DBOS for one mode, then the next mode, then
the floor again) so drift hits both alike; the ratio "pfar ÷" is pfar's steps/s over
DBOS's in the same mode (above 1: pfar is faster; for recovery, DBOS's seconds over
pfar's). Then what one task sends the server, counted statement by statement.

    python -m bench.postgres [--dsn DSN] [--quick]      or    python -m bench.run --postgres [DSN]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

try:
    from bench import pg_dbos, pg_pfar
    from bench.common import STEPS_PER_TASK, Result, fresh_dir, package_version
    from bench.pg_server import DEFAULT_DSN, describe_server, postgres_floor, round_trip_us
except ModuleNotFoundError:  # run as a script: python bench/postgres.py
    import pg_dbos  # type: ignore[no-redef]
    import pg_pfar  # type: ignore[no-redef]
    from common import STEPS_PER_TASK, Result, fresh_dir, package_version  # type: ignore[no-redef]
    from pg_server import (  # type: ignore[no-redef]
        DEFAULT_DSN,
        describe_server,
        postgres_floor,
        round_trip_us,
    )

Row = Result | tuple[str, str, str]


def recovery_row(rec: pg_pfar.Recovery) -> Result:
    """Recovery as a table row: steps left after the restart over spawn -> all done."""
    ready = "" if rec.spawn_to_ready is None else f"ready after {rec.spawn_to_ready:.2f} s, "
    return Result.measured(
        rec.system,
        "recovery",
        rec.steps_left,
        rec.spawn_to_done,
        tasks=rec.tasks,
        concurrency=rec.tasks,
        mechanism="SIGKILL + new process",
        note=f"{ready}all done after {rec.spawn_to_done:.2f} s, {rec.note}",
    )


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def format_table(rows: list[Row], floor_rate: float | None) -> str:
    pfar_rate = {r.mode: r.steps_per_s for r in rows if isinstance(r, Result) and r.name == "pfar"}
    header = (
        f"{'system':<10} {'mode':<11} {'in flight':>9} {'tasks':>6} {'steps':>7} "
        f"{'seconds':>8} {'steps/s':>9} {'x floor':>8} {'pfar ÷':>7}  how"
    )
    out = [header, "-" * len(header)]
    for row in rows:
        if not isinstance(row, Result):
            name, mode, text = row
            out.append(f"{name:<10} {mode:<11} {text}")
            continue
        vs_pfar = "-" if row.name in ("pfar", "postgres") else _ratio(
            pfar_rate.get(row.mode), row.steps_per_s
        )  # fmt: skip
        how = ", ".join(x for x in (row.mechanism, row.note) if x)
        out.append(
            f"{row.name:<10} {row.mode:<11} {row.concurrency:>9} {row.tasks:>6} "
            f"{row.steps:>7} {row.seconds:>8.2f} {row.steps_per_s:>9.1f} "
            f"{_ratio(row.steps_per_s, floor_rate):>8} {vs_pfar:>7}  {how}"
        )
    return "\n".join(out)


def _measure(label: str, fn: Callable[[], Any], failed: list[str]) -> Any | None:
    try:
        result = fn()
    except Exception as exc:
        failed.append(f"{label}: {exc!r}")
        print(f"  FAILED {label}: {exc!r}", flush=True)
        traceback.print_exc(file=sys.stderr)
        return None
    if isinstance(result, Result):
        print(f"  done {label}: {result.steps_per_s:,.1f} steps/s", flush=True)
    else:
        print(f"  done {label}", flush=True)
    return result


def run(
    dsn: str,
    *,
    seq: int,
    conc: int,
    width: int = 64,
    recover: int = 1000,
    floor_commits: int = 5000,
    anchors: bool = True,
    base_dir: str | None = None,
) -> int:
    """Measure, print the table; 1 when a measurement failed."""
    print(describe_server(dsn))
    print(
        f"round trip (SELECT 1, one connection): {round_trip_us(dsn):.0f} µs median; versions: "
        f"pfar {package_version('pfar')}, dbos {package_version('dbos')}, "
        f"psycopg {package_version('psycopg')}"
    )
    started = time.perf_counter()
    failed: list[str] = []
    floors: list[Result] = []
    rows: list[Row] = []

    def floor() -> None:
        r = _measure("postgres floor", lambda: postgres_floor(dsn, floor_commits), failed)
        if r is not None:
            floors.append(r)

    def both(mode: str, pfar: Callable[[], Any], dbos: Callable[[], Any]) -> None:
        plan = [("pfar", pfar)] + ([("dbos", dbos)] if anchors else [])
        for name, fn in plan:
            r = _measure(f"{name} {mode}", fn, failed)
            if r is None:
                rows.append((name, mode, "FAILED (see above)"))
            else:
                rows.append(r if isinstance(r, Result) else recovery_row(r))

    floor()
    both(
        "sequential",
        lambda: pg_pfar.pfar_pg_sequential(dsn, seq, base_dir=base_dir),
        lambda: pg_dbos.dbos_pg_sequential(dsn, seq),
    )
    both(
        "concurrent",
        lambda: pg_pfar.pfar_pg_concurrent(dsn, conc, width=width, base_dir=base_dir),
        lambda: pg_dbos.dbos_pg_concurrent(dsn, conc, width=width),
    )
    with fresh_dir(base_dir) as err_dir:
        both(
            "recovery",
            lambda: pg_pfar.pfar_pg_recovery(dsn, recover, base_dir=base_dir),
            lambda: pg_dbos.dbos_pg_recovery(dsn, recover, err_dir=err_dir),
        )
    floor()
    statements = [
        _measure(
            f"pfar statements per task, {w} in flight",
            lambda n=n, w=w: pg_pfar.pfar_pg_statements(dsn, n, width=w, base_dir=base_dir),
            failed,
        )
        for n, w in ((20, 1), (3 * width, width))
    ]

    floor_rate = statistics.fmean(f.steps_per_s for f in floors) if floors else None
    if floors:
        first, last = floors[0], floors[-1]
        rows.insert(
            0,
            Result(
                "postgres",
                "floor",
                sum(f.steps for f in floors),
                sum(f.seconds for f in floors),
                floor_rate or 0.0,
                tasks=sum(f.tasks for f in floors),
                note=(
                    f"mean of start {first.steps_per_s:,.0f} and end {last.steps_per_s:,.0f} "
                    "commits/s (psycopg, one connection, BEGIN/INSERT/COMMIT per step)"
                ),
            ),
        )
    print("\non PostgreSQL (pfar's journal and DBOS's system database on the same server):")
    print(format_table(rows, floor_rate))
    print(
        "\nx floor: steps/s over the floor's commits/s.  pfar ÷: pfar's steps/s over DBOS's "
        "in the same mode.\nrecovery: steps left after the restart "
        f"({STEPS_PER_TASK - pg_pfar.HOLD_STEP} a task) over the seconds from spawning the "
        "new process until every task is done."
    )
    counted = [s for s in statements if s is not None]
    if counted:
        print(
            "\nwhat pfar sends the server (a run of its own, every statement counted, every "
            f"round trip timed; one alone takes {round_trip_us(dsn):.0f} µs):"
        )
        for i, s in enumerate(counted):
            print(pg_pfar.describe_statements(s, top=i == 0))
    print(f"\ntotal wall time on PostgreSQL {time.perf_counter() - started:.1f}s")
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN, help=f"the server ({DEFAULT_DSN})")
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--seq", type=int, default=None, help="tasks, sequential (200; quick 50)")
    parser.add_argument("--conc", type=int, default=None, help="tasks, concurrent (640; quick 192)")
    parser.add_argument("--width", type=int, default=64, help="tasks in flight (64)")
    parser.add_argument("--recover", type=int, default=1000, help="tasks killed (1000)")
    parser.add_argument("--no-anchors", action="store_true", help="pfar and the floor only")
    parser.add_argument("--base-dir", default=None, help="where temp dirs go (default: $TMPDIR)")
    args = parser.parse_args(argv)
    return run(
        args.dsn,
        seq=args.seq or (50 if args.quick else 200),
        conc=args.conc or (192 if args.quick else 640),
        width=args.width,
        recover=args.recover,
        floor_commits=1500 if args.quick else 5000,
        anchors=not args.no_anchors,
        base_dir=args.base_dir,
    )


if __name__ == "__main__":
    raise SystemExit(main())
