"""A SKILL.md read: the Agent Skills format's YAML front matter (`name`, `description`,
optional `license`, `compatibility`, `metadata`, `allowed-tools`), then the instructions
in markdown.

The front matter is read with PyYAML's safe loader: no tag builds an object, so a skill
from a cloned repository cannot run code by being read. `allowed-tools` is tolerated
and ignored: a skill's words never widen what a task may do (the owner's `[loop]`
settings and answers decide that).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import yaml

# a SKILL.md larger than this is not loaded: its body goes into the model's context
MAX_SKILL_BYTES: Final = 128 * 1024
MAX_NAME: Final = 64
MAX_DESCRIPTION: Final = 1024
MAX_COMPATIBILITY: Final = 500
# lowercase letters and digits, in words joined by single hyphens (the format's rule)
NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_KNOWN: Final = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)


@dataclass(frozen=True, slots=True)
class SkillFile:
    """A SKILL.md that follows the format."""

    name: str
    description: str
    body: str  # the instructions after the front matter


@dataclass(frozen=True, slots=True)
class Unusable:
    """Why a SKILL.md is not loaded (shown to the owner beside the skill's folder)."""

    why: str


def parse(data: bytes, folder: str) -> SkillFile | Unusable:
    """The SKILL.md `data` of the skill folder named `folder`, or why it is unusable."""
    if len(data) > MAX_SKILL_BYTES:
        return Unusable(f"SKILL.md is {len(data):,} bytes, over {MAX_SKILL_BYTES:,}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Unusable(f"SKILL.md is not UTF-8 text (at byte offset {exc.start})")
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return Unusable("SKILL.md does not start with a YAML front matter ('---' line)")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n") == "---"), None)
    if end is None:
        return Unusable("SKILL.md's front matter has no closing '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        return Unusable(f"SKILL.md's front matter is not valid YAML{where}: {problem}")
    if not isinstance(meta, dict):
        return Unusable("SKILL.md's front matter is not a mapping of fields")
    why = _fields(meta, folder)
    if why is not None:
        return Unusable(f"SKILL.md's front matter: {why}")
    return SkillFile(meta["name"], meta["description"].strip(), "".join(lines[end + 1 :]).strip())


def _fields(meta: dict[object, object], folder: str) -> str | None:
    unknown = sorted(str(k) for k in meta if k not in _KNOWN)
    if unknown:
        return f"unknown field {unknown[0]!r} (the format has {', '.join(sorted(_KNOWN))})"
    name = meta.get("name")
    if name is None:
        return "`name` is missing"
    if not isinstance(name, str):
        return f"`name` is not text ({type(name).__name__})"
    if len(name) > MAX_NAME:
        return f"`name` is {len(name)} characters, over {MAX_NAME}"
    if not NAME.fullmatch(name):
        return (
            f"`name` {name!r} is not lowercase letters and digits in words joined by single hyphens"
        )
    if name != folder:
        return f"`name` {name!r} is not its folder's name {folder!r}"
    description = meta.get("description")
    if description is None:
        return "`description` is missing"
    if not isinstance(description, str) or not description.strip():
        return "`description` is not a non-empty text"
    if len(description) > MAX_DESCRIPTION:
        return f"`description` is {len(description)} characters, over {MAX_DESCRIPTION}"
    compatibility = meta.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY
    ):
        return f"`compatibility` is not a text of at most {MAX_COMPATIBILITY} characters"
    metadata = meta.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return "`metadata` is not a mapping"
    return None
