"""Every benchmark in one go: pfar beside DBOS, LangGraph and the raw sqlite floor.

One table of durable steps/s with two ratios, since absolute figures on a shared machine
drift from run to run while ratios taken minutes apart drift much less:

- "x floor": the row's steps/s over the raw sqlite3 floor's commits/s (bench/floor.py;
  one fsync'd WAL commit per step). The floor is measured at the start and at the end and
  the mean is used; both are printed, so drift during the run is visible.
- "pfar ÷": pfar's steps/s in the same mode over the row's (above 1: pfar is faster).

Then pfar's own figures (recovery after SIGKILL, plan_recovery on a big journal, memory
with parked tasks) and, per target, whether it was met. Runs are interleaved (pfar, DBOS,
LangGraph for one mode, then the next mode) so slow drift hits all three alike.

With --postgres [DSN] (default: the local server), the same workloads then run with
pfar's journal and DBOS's system database on PostgreSQL, in a table of their own
(bench/postgres.py).

    python -m bench.run [--quick] [--base-dir DIR] [--json] [--postgres [DSN]]
    python bench/run.py  [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

try:
    from bench import anchors, pfar_bench, postgres
    from bench.common import Result, SkipAnchor, environment, package_version
    from bench.floor import sqlite_floor
except ModuleNotFoundError:  # run as a script: python bench/run.py
    import anchors  # type: ignore[no-redef]
    import pfar_bench  # type: ignore[no-redef]
    import postgres  # type: ignore[no-redef]
    from common import Result, SkipAnchor, environment, package_version  # type: ignore[no-redef]
    from floor import sqlite_floor  # type: ignore[no-redef]

Row = Result | tuple[str, str, str]


_failed: list[str] = []


def _run(
    label: str, fn: Callable[[], Any], rows: list[Row] | None, caught: list[str]
) -> Any | None:
    """Run one measurement; a missing package or a failure becomes a row, not a crash."""
    name, _, mode = label.partition(" ")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            result = fn()
        except SkipAnchor as skip:
            if rows is not None:
                rows.append((name, mode, f"skipped: {skip}"))
            print(f"  skipped {label}: {skip}", flush=True)
            return None
        except Exception as exc:
            _failed.append(f"{label}: {exc!r}")
            if rows is not None:
                rows.append((name, mode, f"FAILED: {exc!r}"))
            print(f"  FAILED {label}: {exc!r}", flush=True)
            return None
        finally:
            caught.extend(f"{label}: {w.category.__name__}: {w.message}" for w in seen)
    if isinstance(result, Result):
        if rows is not None:
            rows.append(result)
        how = f" ({result.mechanism})" if result.mechanism else ""
        print(f"  done {label}{how}: {result.steps_per_s:,.1f} steps/s", flush=True)
    else:
        print(f"  done {label}", flush=True)
    return result


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}"


def format_ratio_table(rows: list[Row], floor_rate: float | None) -> str:
    """The common table plus 'x floor' and 'pfar ÷' columns."""
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
        vs_floor = _ratio(row.steps_per_s, floor_rate)
        if row.name == "pfar" or row.mode == "floor":
            vs_pfar = "-"
        else:
            vs_pfar = _ratio(pfar_rate.get(row.mode), row.steps_per_s)
        how = ", ".join(x for x in (row.mechanism, row.note) if x)
        out.append(
            f"{row.name:<10} {row.mode:<11} {row.concurrency:>9} {row.tasks:>6} "
            f"{row.steps:>7} {row.seconds:>8.2f} {row.steps_per_s:>9.1f} {vs_floor:>8} "
            f"{vs_pfar:>7}  {how}"
        )
    return "\n".join(out)


def _encryption_cost(
    seq_n: int, conc_n: int, width: int, base: Any, caught: list[str]
) -> list[tuple[str, float | None, float | None, str]]:
    """The same figures on a plain vault and an encrypted one, each pair run back to back
    (plain first, then encrypted) so that drift hits both alike."""
    rows: list[tuple[str, float | None, float | None, str]] = []

    def pair(what: str, unit: str, measure: Callable[[bool], float | None]) -> None:
        plain = _run(f"pfar-plain {what}", lambda: measure(False), None, caught)
        enc = _run(f"pfar-encrypted {what}", lambda: measure(True), None, caught)
        rows.append((what, plain, enc, unit))

    def seq(encrypted: bool) -> float:
        r = pfar_bench.pfar_sequential(seq_n, base_dir=base, encrypted=encrypted)
        return r.steps_per_s

    def conc(encrypted: bool) -> float:
        r = pfar_bench.pfar_concurrent(conc_n, width=width, base_dir=base, encrypted=encrypted)
        return r.steps_per_s

    def recovery(encrypted: bool) -> float:
        r = pfar_bench.pfar_recovery(1000, base_dir=base, encrypted=encrypted)
        return r.spawn_to_done

    def startup(encrypted: bool) -> float:
        return pfar_bench.pfar_startup(base_dir=base, encrypted=encrypted)

    pair("one task at a time", "steps/s", seq)
    pair(f"{width} at once", "steps/s", conc)
    pair("1,000 killed tasks, spawn → all Completed", "s", recovery)
    pair("kernel start-up", "s", startup)
    return rows


def format_cipher_table(rows: list[tuple[str, float | None, float | None, str]]) -> str:
    lines = [f"  {'figure':<44} {'plain':>12} {'encrypted':>12}  encrypted ÷ plain"]
    for what, plain, enc, unit in rows:
        if plain is None or enc is None:
            lines.append(f"  {what:<44} {'failed':>12}")
            continue
        if unit == "steps/s":
            a, b = f"{plain:,.0f} {unit}", f"{enc:,.0f} {unit}"
        else:
            a, b = f"{plain:.3f} {unit}", f"{enc:.3f} {unit}"
        lines.append(f"  {what:<44} {a:>12} {b:>12}  {enc / plain:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="pfar, DBOS, LangGraph and the sqlite floor.")
    parser.add_argument("--quick", action="store_true", help="smaller counts (about a minute)")
    parser.add_argument("--seq", type=int, default=None, help="tasks, sequential (200; quick 50)")
    parser.add_argument("--conc", type=int, default=None, help="tasks, concurrent (640; quick 192)")
    parser.add_argument("--width", type=int, default=64, help="tasks in flight (64)")
    parser.add_argument("--no-anchors", action="store_true", help="pfar and the floor only")
    parser.add_argument("--base-dir", default=None, help="where temp dirs go (default: $TMPDIR)")
    parser.add_argument("--json", action="store_true", help="also print figures as JSON lines")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=postgres.DEFAULT_DSN,
        default=None,
        metavar="DSN",
        help=f"then the same on PostgreSQL, pfar beside DBOS (default {postgres.DEFAULT_DSN})",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    seq_n = args.seq or (50 if quick else 200)
    conc_n = args.conc or (192 if quick else 640)
    floor_n = 1500 if quick else 5000
    finished = 100_000 if quick else 1_000_000
    width, base = args.width, args.base_dir

    print(environment(base))
    print(
        "versions: "
        + ", ".join(
            f"{d} {package_version(d)}"
            for d in ("pfar", "dbos", "langgraph", "langgraph-checkpoint-sqlite", "aiosqlite")
        )
    )
    print(f"workload: tasks of {pfar_bench.STEPS_PER_TASK} steps, each durable before the next")
    started = time.perf_counter()
    rows: list[Row] = []
    caught: list[str] = []
    floors: list[Result] = []

    def floor() -> None:
        r = _run("sqlite3 floor", lambda: sqlite_floor(floor_n, base_dir=base), None, caught)
        if r is not None:
            floors.append(r)

    floor()
    plan: list[tuple[str, Callable[[], Any]]] = [
        ("pfar sequential", lambda: pfar_bench.pfar_sequential(seq_n, base_dir=base)),
    ]
    if not args.no_anchors:
        plan += [
            ("dbos sequential", lambda: anchors.dbos_sequential(seq_n, base_dir=base)),
            ("langgraph sequential", lambda: anchors.langgraph_sequential(seq_n, base_dir=base)),
        ]
    plan.append(
        (
            "pfar concurrent",
            lambda: pfar_bench.pfar_concurrent(conc_n, width=width, base_dir=base),
        )
    )
    if not args.no_anchors:
        plan += [
            (
                "dbos concurrent",
                lambda: anchors.dbos_concurrent(conc_n, width=width, base_dir=base),
            ),
            (
                "langgraph concurrent",
                lambda: anchors.langgraph_concurrent(conc_n, width=width, base_dir=base),
            ),
        ]
    for label, fn in plan:
        _run(label, fn, rows, caught)
    floor()

    cipher = _encryption_cost(seq_n, conc_n, width, base, caught)
    rec = _run("pfar recovery", lambda: pfar_bench.pfar_recovery(1000, base_dir=base), None, caught)
    if rec is not None:
        print("    " + pfar_bench.describe_recovery(rec), flush=True)
        rows.append(pfar_bench.recovery_result(rec))
    plan_fig = _run(
        "pfar plan_recovery",
        lambda: pfar_bench.pfar_plan_recovery(10_000, finished, base_dir=base),
        None,
        caught,
    )
    if plan_fig is not None:
        print("    " + pfar_bench.describe_plan(plan_fig), flush=True)
    mem = _run(
        "pfar memory", lambda: pfar_bench.pfar_parked_memory(1000, base_dir=base), None, caught
    )
    if mem is not None:
        print("    " + pfar_bench.describe_memory(mem), flush=True)

    floor_rate = statistics.fmean(f.steps_per_s for f in floors) if floors else None
    if floors:
        first, last = floors[0], floors[-1]
        floor_row = Result(
            "sqlite3",
            "floor",
            sum(f.steps for f in floors),
            sum(f.seconds for f in floors),
            floor_rate or 0.0,
            tasks=sum(f.tasks for f in floors),
            note=(
                f"mean of start {first.steps_per_s:,.0f} and end {last.steps_per_s:,.0f} "
                "commits/s (WAL, FULL, one INSERT+COMMIT per step)"
            ),
        )
        rows.insert(0, floor_row)

    seq = next((r for r in rows if isinstance(r, Result) and r.name == "pfar"
                and r.mode == "sequential"), None)  # fmt: skip
    conc = next((r for r in rows if isinstance(r, Result) and r.name == "pfar"
                 and r.mode == "concurrent"), None)  # fmt: skip
    print()
    print(format_ratio_table(rows, floor_rate))
    print(
        "\nx floor: steps/s over the floor's commits/s.  pfar ÷: pfar's steps/s in the same "
        "mode over this row's.\nrecovery row: steps left after the restart over the seconds "
        "from spawning the new kernel process until every task is Completed."
    )
    if cipher:
        print("\nthe cost of encryption (pfar init's default, SQLCipher 4) beside a plain vault:")
        print(format_cipher_table(cipher))
    print("\ntargets:")
    print(pfar_bench.format_targets(pfar_bench.targets(seq, conc, rec, plan_fig, mem)))
    if quick:
        print("(--quick: fewer tasks, and plan_recovery over 100,000 finished tasks, not 1M)")
    print(f"\ntotal wall time {time.perf_counter() - started:.1f}s")
    for line in dict.fromkeys(caught):
        print(f"warning: {line}")
    if args.json:
        for r in rows:
            if isinstance(r, Result):
                print(json.dumps({"kind": "Result", **asdict(r)}))
        for fig in (rec, plan_fig, mem):
            if fig is not None:
                print(json.dumps({"kind": type(fig).__name__, **asdict(fig)}))
    sys.stdout.flush()
    pg_failed = 0
    if args.postgres is not None:
        print()
        pg_failed = postgres.run(
            args.postgres,
            seq=seq_n,
            conc=conc_n,
            width=width,
            floor_commits=floor_n,
            anchors=not args.no_anchors,
            base_dir=base,
        )
    for line in _failed:
        print(f"FAILED: {line}")
    return 1 if _failed or pg_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
