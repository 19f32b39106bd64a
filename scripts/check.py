"""The whole test suite: lint, types, architecture, tests. What CI runs, what you run."""

from __future__ import annotations

import os
import shutil
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


# Debian packages that features use when present (their tests skip without them, and
# fail under CI=true): command -> package. chromium is the browser the web console's
# tests drive (tests/browser/): Playwright launches it, and never downloads its own.
SYSTEM_PACKAGES = {"rg": "ripgrep", "git": "git", "bwrap": "bubblewrap", "chromium": "chromium"}


def install_system_packages() -> None:
    """Where this runs as root on Debian (CI does), install what is missing; elsewhere
    say what the tests that need it will skip."""
    missing = {cmd: pkg for cmd, pkg in SYSTEM_PACKAGES.items() if shutil.which(cmd) is None}
    if not missing:
        return
    names = sorted(set(missing.values()))
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"==> not installed: {', '.join(names)} (the tests that need them skip)")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *names]
    # system packages change the machine: the owner is told which, and with what
    print(f"==> installing {', '.join(names)} (as root: {' '.join(install)})", flush=True)
    if subprocess.call(install, env=env, stdout=subprocess.DEVNULL) != 0:
        subprocess.call(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
        subprocess.call(install, env=env, stdout=subprocess.DEVNULL)


def main() -> int:
    install_system_packages()
    for name, cmd in STEPS:
        print(f"==> {name}", flush=True)
        code = subprocess.call([str(c) for c in cmd], cwd=ROOT)
        if code != 0:
            print(f"==> {name} failed (exit {code})", flush=True)
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
