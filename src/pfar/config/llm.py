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
    """One tier: its model (default: llm.model), where its calls go while that model's
    provider is down (`[llm.breaker]`), in order: "model" (another model of the same
    provider) or "provider:model" (a provider of `[llm.providers]`, `local`, or
    llm.provider itself; split at the first colon), and whether its calls think."""

    model: str = ""
    fallback: list[str] = []
    thinking: ThinkingConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: object) -> object:
        # the older form `worker = "model-name"`: the tier's model
        return {"model": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _fallbacks_named(self) -> LLMTier:
        for entry in self.fallback:
            provider, colon, model = entry.partition(":")
            if not entry.strip() or (colon and not (provider and model)):
                raise ValueError(f'fallback {entry!r} is neither a model name nor "provider:model"')
        return self


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


class LLMBreaker(Section):
    """The circuit breaker of each provider (llm/breaker.py): open after `failures`
    calls in a row failed on the provider's side, a probe after `open_seconds`; a call
    with nowhere to fail over waits up to `wait_seconds` for the provider to be back."""

    failures: int = Field(5, ge=1, le=1000)
    open_seconds: float = Field(30, gt=0, le=3600)
    wait_seconds: float = Field(60, ge=0, le=3600)


class LLMProvider(Section):
    """Another provider the tiers' fallbacks can name ("NAME:model"), with its own key."""

    type: Literal["anthropic", "openai"]
    base_url: str = ""
    # the secret in secrets.db holding its API key (default: <NAME>_api_key)
    api_key_secret: str = ""


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
    breaker: LLMBreaker = LLMBreaker()
    providers: dict[str, LLMProvider] = {}

    @model_validator(mode="after")
    def _model_named(self) -> LLMConfig:
        if self.provider != "scripted" and not self.model:
            raise ValueError(f"provider {self.provider!r} needs llm.model (the model's name)")
        for name in self.providers:
            if name in (self.provider, "local", "scripted") or ":" in name or not name:
                raise ValueError(
                    f"llm.providers.{name}: the name is taken (llm.provider, local, scripted) "
                    "or has a colon: choose another"
                )
        known = {self.provider, *self.providers, *(("local",) if self.local else ())}
        for tier in ("cheap", "worker", "planner"):
            for entry in getattr(self.tiers, tier).fallback:
                provider, colon, _ = entry.partition(":")
                if colon and provider not in known:
                    raise ValueError(
                        f"llm.tiers.{tier}.fallback {entry!r} names provider {provider!r}, "
                        f"which is not configured: add [llm.providers.{provider}] "
                        f"(known: {', '.join(sorted(known))})"
                    )
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
