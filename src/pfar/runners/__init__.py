"""Runners: how a task advances. Each journals every boundary it crosses."""

from .asking import answer_outcome, approval_message, credential_message
from .pipeline import advance
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
