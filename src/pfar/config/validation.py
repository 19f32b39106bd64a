"""Validating a settings file: every bad key named, with its file and its problem."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, ConfigErrors
from ..key_hints import suggestion

M = TypeVar("M", bound=BaseModel)


def validate_model(
    model: type[M], data: object, path: Path, context: dict[str, Any] | None = None
) -> M:
    """Validate `data`; on failure raise ConfigError naming every bad key, each with its
    problem (one fix-and-retry round per file, not one per mistake)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        errors = [_problem(path, err, model) for err in exc.errors()]
    raise errors[0] if len(errors) == 1 else ConfigErrors(errors)


def _problem(path: Path, err: Mapping[str, Any], model: type[BaseModel]) -> ConfigError:
    # one of `ValidationError.errors()` (pydantic-core's ErrorDetails: not imported, as
    # pydantic-core is pydantic's dependency, not pfar's)
    key = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key" + suggestion(model, err["loc"])
    elif err["type"] == "value_error":  # our own validators' words, without pydantic's prefix
        msg = msg.removeprefix("Value error, ")
    return ConfigError(str(path), key, msg)
