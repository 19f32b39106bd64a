"""Protected-path matching (tools/protected.py) and the capped walk (tools/coding/walk.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pfar.tools.coding.walk import Walked, walk_files
from pfar.tools.protected import Protection

DEFAULTS = [".git/*", ".env", "*.pem", "*.key"]


@pytest.mark.parametrize(
    "rel",
    [
        ".env",
        "sub/.env",
        "a/b/c/.env",
        "x.pem",
        "deep/x.key",
        ".git/config",
        "vendor/lib/.git/hooks/pre-commit",
        ".env/inside",
    ],
)
def test_patterns_match_at_any_depth(rel: str, tmp_path: Path) -> None:
    guard = Protection.of(DEFAULTS, home=tmp_path / "home", user_home=tmp_path / "u")
    assert guard.rule(tuple(rel.split("/")), str(tmp_path / "w" / rel))


@pytest.mark.parametrize("rel", ["env", "a/.envrc", "x.pem.txt", ".gitignore", "git/config"])
def test_other_names_are_not_protected(rel: str, tmp_path: Path) -> None:
    guard = Protection.of(DEFAULTS, home=tmp_path / "home", user_home=tmp_path / "u")
    assert guard.rule(tuple(rel.split("/")), str(tmp_path / "w" / rel)) is None


def test_built_in_paths_hold_and_only_credentials_can_be_released(tmp_path: Path) -> None:
    user, home = tmp_path / "u", tmp_path / "u" / ".pfar"
    guard = Protection.of([], home=home, user_home=user, unprotect=["~/.kube", str(home)])
    assert "pfar's home" in (guard.rule(None, str(home / "secrets.db")) or "")
    assert "credential" in (guard.rule(None, str(user / ".ssh" / "id_rsa")) or "")
    assert guard.rule(None, str(user / ".kube" / "config")) is None
    assert guard.rule(None, str(user / "notes.txt")) is None
    absolute = Protection.of(["~/private"], home=home, user_home=user)
    assert absolute.rule(None, str(user / "private" / "x"))


def test_the_walk_skips_protected_files_and_stops_at_its_cap(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("a.txt", "b.txt", ".env", "sub/.env", "sub/c.txt"):
        (tmp_path / name).write_text("x")
    guard = Protection.of(DEFAULTS, user_home=tmp_path / "u")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walked = Walked()
        found = ["/".join(f.parts) for f in walk_files(fd, (), str(tmp_path), guard, walked)]
        assert found == ["a.txt", "b.txt", "sub/c.txt"]
        assert walked.protected == 2 and not walked.stopped
        capped = Walked(limit=2)
        assert len(list(walk_files(fd, (), str(tmp_path), guard, capped))) < 3
        assert capped.stopped and "stopped after 2" in " ".join(capped.notes())
    finally:
        os.close(fd)


def test_a_task_directorys_skills_are_protected_from_writes_only(tmp_path: Path) -> None:
    from pfar.tools.skills.finding import TASK_SKILLS

    guard = Protection.of([], home=tmp_path / "home", user_home=tmp_path / "u")
    for rel in (".pfar/skills", ".pfar/skills/x/SKILL.md", "sub/.pfar/skills/y/run.sh"):
        parts = tuple(rel.split("/"))
        where = str(tmp_path / "w" / rel)
        assert "a task directory's skills" in (guard.rule(parts, where, writing=True) or "")
        assert guard.rule(parts, where) is None  # reading them is fine
    for rel in (".pfar/notes.md", "skills/x", ".pfar-skills/x"):
        assert guard.rule(tuple(rel.split("/")), str(tmp_path / rel), writing=True) is None
    assert "/".join(TASK_SKILLS) == ".pfar/skills"  # the place the finder looks in
