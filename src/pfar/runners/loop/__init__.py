"""The agentic loop (seed 001): an open-ended, tool-using agent, durable turn by turn."""

from .answers import apply_answer
from .runner import advance

__all__ = ["advance", "apply_answer"]
