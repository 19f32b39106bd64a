"""The web console's vendored front-end files are the ones their README names: each
exists with the sha256 written there, nothing else is in the folder, and the package
data takes them all into an installed pfar (which serves them; nothing is fetched at
run time)."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "pfar"
VENDOR = PACKAGE / "console" / "static" / "vendor"

# a row of the README's table: | `path` | package | version | licence | sha256 |
ROW = re.compile(r"^\| `([^`]+)` \|[^|]+\|[^|]+\|[^|]+\| ([0-9a-f]{64}) \|$", re.MULTILINE)


def _listed() -> dict[str, str]:
    rows = ROW.findall((VENDOR / "README.md").read_text())
    listed = dict(rows)
    assert len(listed) == len(rows), "a file is listed twice in the vendor README"
    return listed


def test_the_readme_lists_the_libraries_the_console_loads() -> None:
    listed = _listed()
    for name in ("htmx/htmx.min.js", "htmx-ext-sse/sse.min.js", "uplot/uPlot.iife.min.js"):
        assert name in listed
        assert f"{name.split('/')[0]}/LICENSE" in listed


def test_each_listed_file_exists_with_its_sha256() -> None:
    for name, sha256 in _listed().items():
        path = VENDOR / name
        assert path.is_file(), f"{name} is listed in the vendor README but is not there"
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        assert actual == sha256, f"{name}: sha256 {actual}, the vendor README says {sha256}"


def test_no_file_is_vendored_unlisted() -> None:
    present = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*") if p.is_file()} - {"README.md"}
    assert present == set(_listed())


def test_package_data_takes_every_vendored_file() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["pfar"]
    packaged = {p for pattern in patterns for p in PACKAGE.glob(pattern) if p.is_file()}
    for name in _listed():
        assert VENDOR / name in packaged, f"{name} is not in pfar's package data"
