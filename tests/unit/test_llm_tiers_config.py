"""`[llm.tiers.NAME]`, `[llm.providers.NAME]` and `[llm.breaker]`: the older form of a
tier is still read; a fallback naming a provider that is not configured is refused,
naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pfar.config import Config
from pfar.errors import ConfigError
from pfar.kernel.models import fallbacks
from pfar.llm.failover import Route
from pfar.vault.home import Home


def _llm(**llm: object) -> Config:
    return Config.model_validate({"llm": {"provider": "anthropic", "model": "big", **llm}})


def test_the_older_form_of_a_tier_is_its_model() -> None:
    config = _llm(tiers={"cheap": "small", "worker": {"model": "mid", "fallback": ["small"]}})
    assert config.llm.tiers.cheap.model == "small" and config.llm.tiers.cheap.fallback == []
    assert config.llm.tiers.models() == {"cheap": "small", "worker": "mid", "planner": ""}
    assert config.llm.breaker.failures == 5 and config.llm.breaker.open_seconds == 30


def test_a_fallback_names_a_configured_provider() -> None:
    with pytest.raises(ValidationError, match=r"names provider 'openai'.*\[llm.providers.openai\]"):
        _llm(tiers={"worker": {"fallback": ["openai:gpt-4o"]}})
    with pytest.raises(ValidationError, match="neither a model name"):
        _llm(tiers={"worker": {"fallback": [":gpt-4o"]}})
    with pytest.raises(ValidationError, match="the name is taken"):
        _llm(providers={"local": {"type": "openai"}})
    config = _llm(
        tiers={"worker": {"fallback": ["openai:gpt-4o", "small"]}},
        providers={"openai": {"type": "openai"}},
    )
    assert fallbacks(config, Home(Path("/nonexistent"))) == {
        "big": (Route("openai", "gpt-4o"), Route("anthropic", "small"))
    }


def test_one_model_fails_over_one_way() -> None:
    config = _llm(
        tiers={"worker": {"fallback": ["a"]}, "planner": {"fallback": ["b"]}},
    )
    with pytest.raises(ConfigError, match=r"llm\.tiers\.planner\.fallback"):
        fallbacks(config, Home(Path("/nonexistent")))
