"""What a runner is given to advance a task: the journal, tools, model, templates, policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..journal import Journal
from ..llm.proxy import InferenceProxy
from ..policy.redact import Redactor
from ..tools.registry import ToolRegistry
from .templates import TemplateRegistry


@dataclass(slots=True)
class Services:
    journal: Journal
    tools: ToolRegistry
    model: InferenceProxy  # the one chat interface to models
    templates: TemplateRegistry
    secret: Callable[[str], str | None]
    redactor: Redactor
    workspace: Callable[[str], Path]
    approval_timeout_seconds: float
    credential_timeout_seconds: float
    notify_owner: Callable[[], None]
