"""The plan a task executes: data produced once by the plan phase and journaled, never rebuilt."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ProviderError


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    args: dict[str, Any] = {}
    description: str = ""


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: list[PlanStep] = Field(min_length=0)

    @classmethod
    def parse(cls, data: Any, source: str) -> Plan:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "plan"
            raise ProviderError(f"{source}: invalid plan at {where}: {err['msg']}") from None
