"""pfar imports only what pyproject.toml declares: a module that arrives as an SDK's own
dependency may be gone, or another library, in the SDK's next version."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pfar"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {
        _normal(re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0]) for dep in project["dependencies"]
    }


def imported() -> dict[str, list[str]]:
    """Top-level module -> the files importing it (absolute imports, third-party or not)."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], []).append(str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    owners = packages_distributions()
    wanted = declared()
    undeclared = []
    for module, files in imported().items():
        if module == "pfar" or module in sys.stdlib_module_names:
            continue
        dists = {_normal(d) for d in owners.get(module, [])}
        if not dists & wanted:
            undeclared.append(f"{module} (from {', '.join(sorted(dists)) or '?'}): {files[0]}")
    assert undeclared == [], "imported but not declared in pyproject: " + "; ".join(undeclared)


def test_the_walk_sees_the_sdks() -> None:
    # the check above is only as good as the walk: it must see the real imports
    assert {"anthropic", "openai", "pydantic", "httpx"} <= set(imported())
