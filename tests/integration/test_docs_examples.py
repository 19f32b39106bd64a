"""The Python examples in the docs run as written, on a real kernel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


# each document's examples, and a line of what they print that shows they did their work
DOCS = {"README.md": "Completed", "docs/operator-api.md": "Completed", "docs/store.md": "None"}


def _examples() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for n, code in enumerate(PYTHON_BLOCK.findall((ROOT / doc).read_text())):
            found.append((f"{doc}#{n}", code))
    return found


@pytest.mark.parametrize(("where", "code"), _examples(), ids=[w for w, _ in _examples()])
def test_a_python_example_in_the_docs_runs(tmp_path: Path, where: str, code: str) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its homes go under tmp_path
    env.pop("PFAR_HOME", None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{where}:\n{done.stdout}\n{done.stderr}"
    assert DOCS[where.split("#", maxsplit=1)[0]] in done.stdout.splitlines(), done.stdout
