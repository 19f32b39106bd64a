"""The README's first command: `pfar demo` runs to its end on a fresh install."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.crash  # it SIGKILLs a kernel of its own


def test_the_demo_runs_to_its_end_and_proves_no_write_ran_twice() -> None:
    env = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1"}
    env.pop("PFAR_HOME", None)
    env.pop("PFAR_FAULT", None)
    r = subprocess.run(
        [sys.executable, "-m", "pfar", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=110,
        check=False,
    )
    said = r.stdout + r.stderr
    assert r.returncode == 0, said
    assert "no task lost, no write repeated." in said
    assert "ran 2×" not in said and "Traceback" not in said
    # the agent's project is its own: no tool call of the demo is refused as protected
    assert "Blocked by security policy" not in said
    # the agent's command, cut off by the kill, was asked about and not run again
    assert "writes.log  loop:tests         ran 1×" in said
    assert "the agent's model was told: This call was cut off by a crash" in said
