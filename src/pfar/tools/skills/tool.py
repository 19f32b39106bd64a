"""The Skill tool: a skill's instructions, loaded when the model needs them.

The system prompt lists only the names and descriptions of the skills a task was given
(its settings, journaled at its creation); `Skill(name)` returns one's SKILL.md body and
the files beside it, and `Skill(name, file=PATH)` the text of one of those files. It
only reads, and runs nothing: a skill's scripts run through Bash, under its rules
(permissions, the sandbox).

The skill served is the one the task saw: a SKILL.md whose sha256 changed since is
served as it is now, with a note saying so; one that is gone is an error naming it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from typing import Any, ClassVar

from ...errors import ToolFailed
from ...journal.records import Idempotency, Semantics
from ...journal.turns import SkillSeen
from ..base import ToolContext, check_args
from ..protected import NONE
from . import serving
from .format import MAX_SKILL_BYTES, SkillFile, parse

SKILL = "Skill"


class Skill:
    """Reads change nothing: after a crash a cut-off call simply runs again."""

    name: ClassVar[str] = SKILL
    description: ClassVar[str] = (
        "Load a skill listed under 'Skills' in your instructions: its full instructions "
        "and the files beside it. Load a skill when its description fits the work, "
        "before doing that work. With `file` (a path inside the skill's folder, as "
        "listed), the text of that file instead. This only reads: run a skill's scripts "
        "with Bash, as its instructions say."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "the skill's name, as listed",
            },
            "file": {
                "type": "string",
                "minLength": 1,
                "description": "a file of the skill, relative to its folder (e.g. scripts/run.py)",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Read

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None  # a read: run again

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return await asyncio.to_thread(serve, args, ctx)


def serve(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    seen = _seen(str(args["name"]), ctx.skills)
    protection = ctx.protection or NONE
    if "file" in args:
        names = serving.names_of(str(args["file"]))
        data = serving.read(seen, names, protection)
        shown = "/".join(names)
        if data is None:
            raise ToolFailed(f"Skill {seen.name}: it has no file {shown}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailed(f"Skill {seen.name}: {shown} is not UTF-8 text") from None
        if "\x00" in text:
            raise ToolFailed(f"Skill {seen.name}: {shown} is a binary file")
        return {"text": text, "skill": seen.name, "file": shown}
    data = serving.read(seen, ("SKILL.md",), protection, MAX_SKILL_BYTES)
    if data is None:
        raise ToolFailed(
            f"Skill {seen.name}: its SKILL.md is gone from {seen.path} since this task "
            "started; do the work without it, or tell the owner"
        )
    digest = hashlib.sha256(data).hexdigest()
    parsed = parse(data, seen.name)
    if not isinstance(parsed, SkillFile):
        raise ToolFailed(
            f"Skill {seen.name}: its SKILL.md in {seen.path} changed since this task "
            f"started and is no longer usable ({parsed.why})"
        )
    lines = [f"Skill {seen.name} ({_where(seen)})"]
    if digest != seen.sha256:
        lines.append(
            f"Note: its SKILL.md changed on disk since this task started (sha256 "
            f"{seen.sha256[:12]} then, {digest[:12]} now): these are its instructions as "
            "they are now."
        )
    lines += ["", parsed.body or "(no instructions beyond its description)", ""]
    lines += _files(seen, str(ctx.workspace))
    return {"text": "\n".join(lines), "skill": seen.name, "sha256": digest}


def _seen(name: str, skills: tuple[SkillSeen, ...]) -> SkillSeen:
    for seen in skills:
        if seen.name == name:
            return seen
    known = ", ".join(s.name for s in skills) or "none"
    raise ToolFailed(f"Skill: no skill named {name!r} was given to this task (skills: {known})")


def _where(seen: SkillSeen) -> str:
    if seen.source == "home":
        return "one of the owner's skills, in pfar's home"
    return f"from the task directory: {seen.path}"


def _files(seen: SkillSeen, workspace: str) -> list[str]:
    files, cut = serving.listing(seen)
    if not files:
        return ["No files beside its SKILL.md."]
    inside = seen.source == "task" and (
        seen.path == workspace or seen.path.startswith(workspace.rstrip("/") + "/")
    )
    if inside:
        rel = os.path.relpath(seen.path, workspace)
        head = (
            "Files beside it (paths relative to the working directory: Read them, and run "
            "its scripts with Bash from there):"
        )
        shown = [f"- {rel}/{f}" for f in files]
    elif seen.source == "task":
        head = (
            f"Files beside it (in {seen.path}, outside the working directory: "
            f'Skill(name="{seen.name}", file=PATH) gives a file\'s text; to run a script, '
            "Write it into the working directory and run it there with Bash):"
        )
        shown = [f"- {f}" for f in files]
    else:
        head = (
            "Files beside it (in pfar's home, which your file tools and commands cannot "
            f'reach: Skill(name="{seen.name}", file=PATH) gives a file\'s text; to run a '
            "script, Write it into the working directory and run it there with Bash):"
        )
        shown = [f"- {f}" for f in files]
    tail = [f"(the first {serving.MAX_LISTED} files only)"] if cut else []
    return [head, *shown, *tail]
