"""Workflow definitions: a named sequence of steps, each a command run in the task directory.

See docs/workflows.md. A malformed file is refused with the file and key named.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from ...config import validate_model
from ...errors import ConfigError
from ..paths import outside_problem


def _inside(relative: str) -> str:
    """Artifacts and the task spec are the workflow directory's files: a path leading out
    (absolute, or '..') would have the check report on, and trust, files elsewhere."""
    problem = outside_problem(relative, "the workflow directory")
    if problem:
        raise ValueError(problem)
    return relative


InsidePath = Annotated[str, AfterValidator(_inside)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class WorkflowStep(_Section):
    name: str = Field(pattern=r"^[A-Za-z0-9_.\- ]+$")
    # argv, run with the task directory as its working directory (no shell)
    run: list[str] = Field(min_length=1)
    description: str = ""
    # files the step is expected to create or change, relative to the task directory
    artifacts: list[InsidePath] = []
    timeout_seconds: float = Field(3600, gt=0, le=7 * 86400)


class WorkflowDefinition(_Section):
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""
    # the task spec the trace points at, relative to the task directory
    task_spec: InsidePath = "spec.md"
    steps: list[WorkflowStep] = Field(min_length=1)

    @field_validator("steps")
    @classmethod
    def _unique(cls, steps: list[WorkflowStep]) -> list[WorkflowStep]:
        names = [s.name for s in steps]
        if len(set(names)) != len(names):
            raise ValueError("step names must be unique")
        return steps


def load_definition(path: Path) -> WorkflowDefinition:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(str(path), "", "workflow definition not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot be read: {exc}") from None
    return validate_model(WorkflowDefinition, data, path)
