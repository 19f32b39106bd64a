"""Runners: how a task advances. Each journals every boundary it crosses."""

from .pipeline import advance, answer_outcome, approval_message, credential_message
from .services import Services
from .templates import Template, TemplateRegistry, load_template

__all__ = [
    "Services",
    "Template",
    "TemplateRegistry",
    "advance",
    "answer_outcome",
    "approval_message",
    "credential_message",
    "load_template",
]
