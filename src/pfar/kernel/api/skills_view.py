"""The skills a loop task started in a directory would be given (`pfar skills`), and the
folders it would not be given, with why. Reading them needs no kernel: they are files,
checked as a new task's are (tools/skills/finding.py), so the answer is the same with a
kernel running or none."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import BadRequest
from ...tools.skills import find
from ...vault.home import Home


@dataclass(frozen=True, slots=True)
class SkillView:
    name: str
    description: str
    source: str  # "home" ($PFAR_HOME/skills) or "task" (the directory's .pfar/skills)
    path: str  # its folder
    sha256: str  # of its SKILL.md


@dataclass(frozen=True, slots=True)
class SkippedSkillView:
    source: str
    path: str
    why: str


@dataclass(frozen=True, slots=True)
class SkillsView:
    directory: str
    skills: tuple[SkillView, ...]
    skipped: tuple[SkippedSkillView, ...]


def skills_for(home: Home, directory: str) -> SkillsView:
    """What a loop task started in `directory` would be given."""
    where = Path(os.path.abspath(os.path.expanduser(directory)))
    if not where.is_dir():
        raise BadRequest("directory", f"{where} is not a directory")
    found = find(home.skills_dir, where)
    return SkillsView(
        str(where),
        tuple(SkillView(s.name, s.description, s.source, s.path, s.sha256) for s in found.skills),
        tuple(SkippedSkillView(s.source, s.path, s.why) for s in found.skipped),
    )
