"""Which skill folders a task is given (the checks a template gets: owner, mode,
symlinks, size, format), and what the Skill tool serves when the task plays the
attacker: a skill folder swapped for a symlink into the vault, `file=../../vault/x`,
a hard link, a file that changed or went since the task started."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from pfar.config import LoopConfig
from pfar.errors import ToolFailed
from pfar.runners.loop.permissions import Policy
from pfar.tools.base import ToolContext
from pfar.tools.protected import Protection
from pfar.tools.skills import Skill, find

ROOT = os.geteuid() == 0


def _skill(parent: Path, name: str, body: str = "Run scripts/go.sh.\n") -> Path:
    folder = parent / name
    (folder / "scripts").mkdir(parents=True)
    front = f"---\nname: {name}\ndescription: the {name} skill\n---\n"
    (folder / "SKILL.md").write_text(front + body)
    (folder / "scripts" / "go.sh").write_text("echo go\n")
    return folder


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A private home with a vault that holds a secret, and a task directory."""
    tmp_path.chmod(0o700)
    home = tmp_path / "home"
    (home / "vault").mkdir(parents=True)
    (home / "vault" / "secrets.db").write_text("VAULT-SECRET")
    (home / "skills").mkdir()
    task = tmp_path / "task"
    (task / ".pfar" / "skills").mkdir(parents=True)
    return home, task


def _ctx(home: Path, task: Path) -> ToolContext:
    found = find(home / "skills", task)
    return ToolContext(
        "t",
        0,
        "t:0",
        task,
        lambda _: None,
        protection=Protection.of([".env"], home=home, user_home=task),
        skills=found.skills,
    )


def _serve(ctx: ToolContext, **args: str) -> str:
    Skill().validate(args)
    return str(asyncio.run(Skill().run(args, ctx))["text"])


def test_skills_of_the_home_and_the_task_directory_are_found_by_name(
    places: tuple[Path, Path],
) -> None:
    home, task = places
    _skill(home / "skills", "alpha")
    _skill(task / ".pfar" / "skills", "beta")
    (task / ".pfar" / "skills" / "README.md").write_text("not a skill")
    found = find(home / "skills", task)
    assert [(s.name, s.source) for s in found.skills] == [("alpha", "home"), ("beta", "task")]
    md = (task / ".pfar" / "skills" / "beta" / "SKILL.md").read_bytes()
    assert found.skills[1].sha256 == hashlib.sha256(md).hexdigest()
    assert found.skills[1].path == str(task / ".pfar" / "skills" / "beta")
    assert found.skipped == ()


def test_on_a_name_in_both_places_the_homes_skill_wins(places: tuple[Path, Path]) -> None:
    home, task = places
    _skill(home / "skills", "same")
    _skill(task / ".pfar" / "skills", "same")
    found = find(home / "skills", task)
    assert [s.source for s in found.skills] == ["home"]
    (skipped,) = found.skipped
    assert skipped.source == "task" and "the home's wins" in skipped.why


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        (lambda f: (f / "SKILL.md").chmod(0o666), "SKILL.md is world-writable"),
        (lambda f: (f / "SKILL.md").chmod(0o620), "SKILL.md is group-writable"),
        (lambda f: f.chmod(0o777), "its folder is world-writable"),
        (lambda f: (f / "SKILL.md").unlink(), "has no SKILL.md"),
        (lambda f: (f / "SKILL.md").write_bytes(b"x" * 200_000), "over 131,072"),
        (lambda f: (f / "SKILL.md").write_bytes(b"---\nname: one\n---\n"), "`description`"),
        (lambda f: (f / "SKILL.md").write_bytes(b"\xff\xfe"), "not UTF-8"),
        (lambda f: os.link(f / "SKILL.md", f.parent / "copy.md"), "other names (hard links)"),
    ],
)
def test_a_folder_that_fails_a_check_is_skipped_and_named(
    places: tuple[Path, Path], spoil: object, why: str
) -> None:
    home, task = places
    folder = _skill(task / ".pfar" / "skills", "one")
    _skill(task / ".pfar" / "skills", "two")
    spoil(folder)  # type: ignore[operator]
    found = find(home / "skills", task)
    assert [s.name for s in found.skills] == ["two"]
    (skipped,) = found.skipped
    assert skipped.path == str(folder) and why in skipped.why, skipped.why


@pytest.mark.skipif(not ROOT, reason="giving a file to another user needs root")
def test_a_skill_owned_by_another_user_is_skipped(places: tuple[Path, Path]) -> None:
    home, task = places
    folder = _skill(task / ".pfar" / "skills", "theirs")
    os.chown(folder / "SKILL.md", 65534, 65534)
    (skipped,) = find(home / "skills", task).skipped
    assert "owned by another user (uid 65534)" in skipped.why


def test_a_skills_folder_under_a_folder_open_to_others_is_skipped_whole(
    places: tuple[Path, Path],
) -> None:
    home, task = places
    _skill(task / ".pfar" / "skills", "one")
    task.chmod(0o777)
    found = find(home / "skills", task)
    assert found.skills == ()
    (skipped,) = found.skipped
    assert "world-writable" in skipped.why and skipped.path.endswith(".pfar/skills")


def test_symlinked_skill_folders_and_files_are_never_followed(places: tuple[Path, Path]) -> None:
    home, task = places
    skills = task / ".pfar" / "skills"
    (skills / "vault").symlink_to(home / "vault")
    elsewhere = _skill(task, "linked")
    (skills / "linked").symlink_to(elsewhere)
    folder = skills / "md-link"
    folder.mkdir()
    (folder / "SKILL.md").symlink_to(elsewhere / "SKILL.md")
    found = find(home / "skills", task)
    assert found.skills == ()
    why = {Path(s.path).name: s.why for s in found.skipped}
    assert "symbolic link" in why["vault"] and "symbolic link" in why["linked"]
    assert "SKILL.md is a symbolic link" in why["md-link"]


def test_a_task_directorys_skills_folder_that_is_a_symlink_is_skipped(
    places: tuple[Path, Path],
) -> None:
    home, task = places
    _skill(home / "skills", "alpha")
    (task / ".pfar" / "skills").rmdir()
    (task / ".pfar" / "skills").symlink_to(home / "skills")
    found = find(home / "skills", task)
    assert [s.source for s in found.skills] == ["home"]
    assert "symbolic link" in found.skipped[0].why


def test_the_skill_tool_serves_the_body_and_lists_the_files(places: tuple[Path, Path]) -> None:
    home, task = places
    _skill(home / "skills", "alpha", "Alpha's steps.\n")
    _skill(task / ".pfar" / "skills", "beta", "Beta's steps.\n")
    ctx = _ctx(home, task)
    text = _serve(ctx, name="beta")
    assert "Beta's steps." in text
    assert "- .pfar/skills/beta/scripts/go.sh" in text  # relative to the working directory
    text = _serve(ctx, name="alpha")
    assert "Alpha's steps." in text and "- scripts/go.sh" in text and "pfar's home" in text
    assert _serve(ctx, name="alpha", file="scripts/go.sh") == "echo go\n"
    with pytest.raises(ToolFailed, match=r"no skill named 'gamma'.*alpha, beta"):
        _serve(ctx, name="gamma")


def test_the_vault_cannot_be_read_through_the_skill_tool(places: tuple[Path, Path]) -> None:
    home, task = places
    _skill(home / "skills", "alpha")
    beta = _skill(task / ".pfar" / "skills", "beta")
    ctx = _ctx(home, task)
    for name in ("alpha", "beta"):
        with pytest.raises(ToolFailed, match=r"leads out of the skill's folder"):
            _serve(ctx, name=name, file="../../vault/secrets.db")
        with pytest.raises(ToolFailed, match="is absolute"):
            _serve(ctx, name=name, file=str(home / "vault" / "secrets.db"))
    # after the task started, its skill folder is swapped for a symlink into the vault
    os.rename(beta, task / "old")
    beta.symlink_to(home / "vault")
    with pytest.raises(ToolFailed, match="symbolic link"):
        _serve(ctx, name="beta", file="secrets.db")
    with pytest.raises(ToolFailed, match="symbolic link"):
        _serve(ctx, name="beta")
    # a symlink inside a skill's folder, and a hard link, are not served either
    beta.unlink()
    os.rename(task / "old", beta)
    (beta / "secret").symlink_to(home / "vault" / "secrets.db")
    with pytest.raises(ToolFailed, match="symbolic link"):
        _serve(ctx, name="beta", file="secret")
    os.link(home / "vault" / "secrets.db", beta / "hard")
    with pytest.raises(ToolFailed, match="hard links"):
        _serve(ctx, name="beta", file="hard")
    # and a protected name (the owner's patterns) in a task directory's skill
    (beta / ".env").write_text("TOKEN=1")
    with pytest.raises(ToolFailed, match="protected path"):
        _serve(ctx, name="beta", file=".env")


def test_a_skill_changed_since_the_task_started_says_so_and_one_gone_is_an_error(
    places: tuple[Path, Path],
) -> None:
    home, task = places
    beta = _skill(task / ".pfar" / "skills", "beta", "Old steps.\n")
    ctx = _ctx(home, task)
    (beta / "SKILL.md").write_text("---\nname: beta\ndescription: d\n---\nNew steps.\n")
    text = _serve(ctx, name="beta")
    assert "changed on disk since this task started" in text and "New steps." in text
    (beta / "SKILL.md").write_text("no front matter")
    with pytest.raises(ToolFailed, match="no longer usable"):
        _serve(ctx, name="beta")
    (beta / "SKILL.md").unlink()
    with pytest.raises(ToolFailed, match=f"SKILL.md is gone from {beta}"):
        _serve(ctx, name="beta")


def test_a_task_directory_reached_through_a_symlink_has_its_skills(
    places: tuple[Path, Path],
) -> None:
    home, task = places
    _skill(task / ".pfar" / "skills", "beta")
    (task.parent / "link").symlink_to(task)
    found = find(home / "skills", task.parent / "link")
    assert [s.name for s in found.skills] == ["beta"] and found.skipped == ()


def test_a_standing_never_names_a_skill_though_skill_is_always_allowed() -> None:
    policy = Policy.of(LoopConfig(deny=["Skill(release-notes)"]))
    assert "Skill" in LoopConfig().always_allow
    assert policy.standing([], "Skill", {"name": "release-notes"}) == "deny"
    assert policy.standing([], "Skill", {"name": "other"}) is None


def test_a_task_directorys_skill_outside_the_working_directory_is_read_through_the_tool(
    places: tuple[Path, Path],
) -> None:
    """A task in a worktree works elsewhere than where its skills were found: their
    files are named inside the skill, and served by the tool."""
    home, task = places
    _skill(task / ".pfar" / "skills", "beta")
    worktree = task.parent / "worktree"
    worktree.mkdir()
    ctx = dataclasses.replace(_ctx(home, task), workspace=worktree)
    text = _serve(ctx, name="beta")
    assert "outside the working directory" in text and "- scripts/go.sh" in text
    assert _serve(ctx, name="beta", file="scripts/go.sh") == "echo go\n"
