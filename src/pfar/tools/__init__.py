"""Tools: each declares Read/Write semantics and how it avoids repeating an effect."""

from .base import Tool, ToolContext
from .registry import ToolRegistry

__all__ = ["Tool", "ToolContext", "ToolRegistry"]
