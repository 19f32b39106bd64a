"""The whole test suite: lint, types, architecture, tests. What CI runs, what you run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

STEPS = [
    ("ruff (lint)", [BIN / "ruff", "check", "src", "tests", "bench", "scripts"]),
    ("ruff (format)", [BIN / "ruff", "format", "--check", "src", "tests", "bench", "scripts"]),
    ("mypy", [BIN / "mypy"]),
    ("import-linter (rooms)", [BIN / "lint-imports"]),
    ("pytest", [BIN / "pytest", *sys.argv[1:]]),
]


def main() -> int:
    for name, cmd in STEPS:
        print(f"==> {name}", flush=True)
        code = subprocess.call([str(c) for c in cmd], cwd=ROOT)
        if code != 0:
            print(f"==> {name} failed (exit {code})", flush=True)
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
