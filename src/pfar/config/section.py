"""The base of every `config.toml` section, and the bounds its durations share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    # strict: a string "600" or a boolean is not a number of seconds
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


DAY = 86_400.0
YEAR = 365 * DAY
