"""The staging directories of a killed `pfar init` are removed by the next init, even
one that finds the home complete; nothing else beside the home is touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..support import pfar, said
from .test_init_interrupted import _init_killed_at


def _staging(root: Path) -> list[Path]:
    return sorted(root.parent.glob(f".{root.name}.init-*"))


@pytest.mark.crash
def test_an_init_killed_after_the_home_was_placed_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    root = tmp_path / "home"
    root.mkdir()
    (root / "config.toml").write_text("# mine\n")  # kept, so its copy stays in staging
    _init_killed_at(root, "placed")
    assert (root / "vault" / "sessions.db").is_file()  # the home is complete
    assert _staging(root), "the killed init should have left its staging directory"
    again = pfar(root, "init")
    assert again.returncode == 1 and "already has a vault" in said(again), said(again)
    assert _staging(root) == [], "the next init should have removed the staging directory"
    assert (root / "config.toml").read_text() == "# mine\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_init_removes_only_its_own_staging_directories(tmp_path: Path) -> None:
    root = tmp_path / "home"
    dead = 2**22 + 12345  # above the usual pid_max: no such process
    dead_staging = tmp_path / f".home.init-{dead}-abcd_123"
    dead_staging.mkdir()
    (dead_staging / "config.toml").write_text("left by a killed init\n")
    theirs = tmp_path / f".home.init-{dead}-theirs12"  # named like ours, another user's
    theirs.mkdir()
    (theirs / "keep").write_text("not pfar's\n")
    os.chown(theirs, 65534, 65534)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("not pfar's\n")
    link = tmp_path / f".home.init-{dead}-symlink1"  # a link to a directory: never followed
    link.symlink_to(target)
    live = tmp_path / f".home.init-{os.getpid()}-running1"  # an init still at work
    live.mkdir()
    odd = tmp_path / ".home.init-notes"  # not init's naming
    odd.mkdir()
    r = pfar(root, "init")
    assert r.returncode == 0, said(r)
    assert not dead_staging.exists()
    for kept in (theirs / "keep", target / "keep", link, live, odd):
        assert kept.exists() or kept.is_symlink(), kept
    assert (target / "keep").read_text() == "not pfar's\n"
