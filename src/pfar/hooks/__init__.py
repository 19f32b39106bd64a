"""Hooks at every decision point (seed 001, "Hook Points Overview"): user handlers that
observe, modify, block or inject where a task decides something (docs/hooks.md)."""

from ..hook_points import SECURITY, HookPoint, capabilities
from .dispatch import NO_HOOKS, Hooks
from .verdicts import PROCEED, Verdict

__all__ = ["NO_HOOKS", "PROCEED", "SECURITY", "HookPoint", "Hooks", "Verdict", "capabilities"]
