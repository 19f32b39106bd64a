"""`[llm]`: the model provider, its limits, retries, prices, tiers and local server."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .section import Section


class LLMRetryConfig(Section):
    """The error table's waits (seed 001, Phase 3): immediate, 1 s, 5 s; 30 s when overloaded."""

    backoff_seconds: list[float] = Field(default_factory=lambda: [0.0, 1.0, 5.0], min_length=1)
    overloaded_wait_seconds: float = Field(30, ge=0, le=3600)
    max_retries: int = Field(3, ge=0, le=20)


class LLMPrice(Section):
    """Dollars per million tokens."""

    input: float = Field(0, ge=0)
    output: float = Field(0, ge=0)


class LocalLLMConfig(Section):
    """An OpenAI-compatible local server (Ollama, vLLM, llama.cpp) for data above the
    cloud ceiling."""

    provider: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key_secret: str = ""  # local servers often need none


class ThinkingConfig(Section):
    """Extended thinking for a tier's calls (Anthropic's models): the model may think up
    to `budget_tokens` before it answers, out of the call's max_tokens."""

    # the API's own floor
    budget_tokens: int = Field(ge=1024)


class LLMTier(Section):
    """One tier: its model (default: llm.model) and whether its calls think. The old
    form, `worker = "model"`, is read as `{ model = "model" }`."""

    model: str = ""
    thinking: ThinkingConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_model_name(cls, data: object) -> object:
        return {"model": data} if isinstance(data, str) else data


class LLMTiers(Section):
    """Models by tier (default: llm.model). Extraction uses `cheap`, planning `worker`,
    synthesis `worker`; a plan still invalid after its correction escalates to `planner`."""

    cheap: LLMTier = LLMTier()
    worker: LLMTier = LLMTier()
    planner: LLMTier = LLMTier()

    def models(self) -> dict[str, str]:
        """Each tier's model ("" for the configured one)."""
        return {name: tier.model for name, tier in self._tiers()}

    def thinking(self) -> dict[str, int]:
        """The thinking budget of each tier that thinks."""
        return {name: t.thinking.budget_tokens for name, t in self._tiers() if t.thinking}

    def _tiers(self) -> list[tuple[str, LLMTier]]:
        return [("cheap", self.cheap), ("worker", self.worker), ("planner", self.planner)]


class LLMConfig(Section):
    provider: Literal["scripted", "anthropic", "openai"] = "scripted"
    # for the scripted provider: the response file, relative to $PFAR_HOME
    script: str = "scripts/default.toml"
    model: str = ""
    base_url: str = ""  # a gateway, a proxy, or an OpenAI-compatible server
    # the secret in secrets.db holding the API key (default: <provider>_api_key)
    api_key_secret: str = ""
    timeout_seconds: float = Field(60, gt=0, le=3600)
    max_tokens: int = Field(4096, gt=0, le=1_000_000)
    # one limit shared by every task; unset: 50 and 200,000 for a real provider,
    # no limit for the scripted one
    requests_per_minute: int | None = Field(None, gt=0)
    tokens_per_minute: int | None = Field(None, gt=0)
    # the limit's window (seconds): a minute; shorter only to test the limiter
    rate_window_seconds: float = Field(60, gt=0, le=3600)
    # data labelled above this never goes to a cloud provider without the owner's approval
    cloud_ceiling: Literal["public", "internal", "sensitive", "secret"] = "internal"
    retry: LLMRetryConfig = LLMRetryConfig()
    prices: dict[str, LLMPrice] = {}
    local: LocalLLMConfig | None = None
    tiers: LLMTiers = LLMTiers()

    @model_validator(mode="after")
    def _model_named(self) -> LLMConfig:
        if self.provider != "scripted" and not self.model:
            raise ValueError(f"provider {self.provider!r} needs llm.model (the model's name)")
        for tier, budget in self.tiers.thinking().items():
            if budget >= self.max_tokens:  # the API's rule: thinking is part of the answer
                raise ValueError(
                    f"llm.tiers.{tier}.thinking.budget_tokens ({budget}) must be less than "
                    f"llm.max_tokens ({self.max_tokens})"
                )
        return self

    @property
    def key_secret(self) -> str:
        return self.api_key_secret or f"{self.provider}_api_key"
