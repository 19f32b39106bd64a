"""CPU instructions per pipeline task, counted by valgrind's callgrind: a figure that does
not drift with the machine, unlike steps/s and the disk's floor.

The benchmark workload (tasks of 10 `bench.noop` reads, pfar's default config) runs in a
child process under callgrind twice, with a small and a large number of tasks; the
difference of the two counts over the difference of the tasks is what one task costs,
start-up and warm-up cancelled out. Both modes: one task at a time and 64 at once.
Instructions are counted in the Python process (the interpreter, SQLite, orjson), not
in the operating system: an fsync costs none here, so read this beside bench.run's
steps/s, not instead of them.

    python -m bench.instructions [--small 32] [--large 160]     # about six minutes

Each figure is given for an encrypted vault (what `pfar init` makes) and a plain one
(`--vault` picks one).

Compare two checkouts with the same harness: run it in each (`PYTHONPATH=other/src`).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
from pathlib import Path

try:
    from bench.common import fresh_dir
    from bench.pfar_bench import WIDTH, _concurrent_run, _sequential_run, make_home
except ModuleNotFoundError:  # run as a script: python bench/instructions.py
    from common import fresh_dir  # type: ignore[no-redef]
    from pfar_bench import (  # type: ignore[no-redef]
        WIDTH,
        _concurrent_run,
        _sequential_run,
        make_home,
    )

MODES = ("sequential", "concurrent")
VAULTS = ("encrypted", "plain")
_COLLECTED = re.compile(r"Collected : (\d+)")


def _child(mode: str, tasks: int, vault: str) -> int:
    with fresh_dir(None) as d:
        home = make_home(d / "home", encrypted=vault == "encrypted")
        if mode == "sequential":
            asyncio.run(_sequential_run(home, tasks, warmup=4))
        else:
            asyncio.run(_concurrent_run(home, tasks, WIDTH, warmup=8))
    return 0


def count(mode: str, tasks: int, vault: str) -> int:
    """Instructions the whole child process ran for `tasks` tasks in `mode`."""
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        mode,
        str(tasks),
        vault,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise RuntimeError(f"callgrind run failed ({mode}, {tasks} tasks):\n{tail}")
    return int(found.group(1))


def per_task(mode: str, small: int, large: int, vault: str) -> float:
    return (count(mode, large, vault) - count(mode, small, vault)) / (large - small)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=32, help="tasks in the small run (32)")
    parser.add_argument("--large", type=int, default=160, help="tasks in the large run (160)")
    parser.add_argument("--mode", choices=MODES, action="append", help="default: both")
    parser.add_argument("--vault", choices=VAULTS, action="append", help="default: both")
    parser.add_argument(
        "--child", nargs=3, metavar=("MODE", "TASKS", "VAULT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child[0], int(args.child[1]), args.child[2])
    if args.large <= args.small:
        parser.error("--large must be more than --small")
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (Debian: apt-get install valgrind)")
        return 0
    print(f"instructions per task of 10 steps (callgrind; {args.large} tasks less {args.small})")
    for mode in args.mode or MODES:
        label = "one task at a time" if mode == "sequential" else f"{WIDTH} tasks at once"
        for vault in args.vault or VAULTS:
            figure = per_task(mode, args.small, args.large, vault)
            print(f"  {label:<20} {vault:<10} {figure / 1e6:6.2f} M", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
