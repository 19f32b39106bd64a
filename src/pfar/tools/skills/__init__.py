"""Skills in the Agent Skills format (docs/skills.md): found with the checks a template
gets (finding.py), listed by name and description in a loop task's system prompt, and
loaded by the model with the Skill tool (tool.py) when it needs one."""

from .finding import Found, Skipped, find
from .format import SkillFile, Unusable, parse
from .tool import SKILL, Skill

__all__ = ["SKILL", "Found", "Skill", "SkillFile", "Skipped", "Unusable", "find", "parse"]
