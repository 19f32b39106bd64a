"""No module under src/pfar passes 400 lines: a module that grows past it is split along
its ideas (one idea per module), not allowed to creep."""

from __future__ import annotations

from pathlib import Path

import pfar

LIMIT = 400
SRC = Path(pfar.__file__).parent


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def test_no_module_passes_the_limit() -> None:
    sizes = {p.relative_to(SRC).as_posix(): _lines(p) for p in SRC.rglob("*.py")}
    assert len(sizes) > 100  # the package was found
    over = {name: n for name, n in sorted(sizes.items()) if n > LIMIT}
    assert not over, f"modules past {LIMIT} lines (split them along their ideas): {over}"
