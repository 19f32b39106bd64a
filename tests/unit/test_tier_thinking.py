"""`[llm.tiers]`: a tier is a table (its model, its extended thinking) or, as before, a
model's name; a thinking budget the API would refuse is refused naming the key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pfar.config import Config
from pfar.config.llm import LLMTier, ThinkingConfig
from pfar.config.validation import validate_model
from pfar.errors import ConfigError

WHERE = Path("config.toml")


def _config(text: str) -> Config:
    return validate_model(Config, tomllib.loads(text), WHERE)


def test_a_tier_is_a_table_or_the_old_model_name() -> None:
    config = _config(
        '[llm.tiers]\ncheap = "m-cheap"\n'
        '[llm.tiers.worker]\nmodel = "m-work"\nthinking = { budget_tokens = 2048 }\n'
    )
    tiers = config.llm.tiers
    assert tiers.cheap == LLMTier(model="m-cheap")
    assert tiers.worker == LLMTier(model="m-work", thinking=ThinkingConfig(budget_tokens=2048))
    assert tiers.models() == {"cheap": "m-cheap", "worker": "m-work", "planner": ""}
    assert tiers.thinking() == {"worker": 2048}
    assert Config().llm.tiers.thinking() == {}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (
            "[llm.tiers.worker]\nthinking = { budget_tokens = 512 }\n",
            r"llm\.tiers\.worker\.thinking\.budget_tokens",
        ),
        (
            "[llm]\nmax_tokens = 4096\n[llm.tiers.planner]\nthinking = { budget_tokens = 4096 }\n",
            r"llm\.tiers\.planner\.thinking\.budget_tokens \(4096\) must be less than "
            r"llm\.max_tokens \(4096\)",
        ),
        ("[llm.tiers.worker]\nthinking = { budget = 2048 }\n", r"budget"),
        ("[llm.tiers.worker]\nmodel = 3\n", r"llm\.tiers\.worker\.model"),
    ],
)
def test_a_thinking_budget_the_api_would_refuse_is_refused_by_name(text: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        _config(text)


def test_a_thinking_budget_a_loop_call_could_not_take_is_refused_naming_both_keys() -> None:
    """A loop call asks for the least of llm.max_tokens and loop.reserve_tokens: a budget
    under the first but not under the second would fail every loop call, so it is
    refused when the config is read."""
    text = (
        "[llm]\nmax_tokens = 32000\n[llm.tiers.worker]\nthinking = { budget_tokens = 20000 }\n"
        "[loop]\nreserve_tokens = 16000\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"llm\.tiers\.worker\.thinking\.budget_tokens \(20000\).*llm\.max_tokens "
        r"\(32000\).*loop\.reserve_tokens \(16000\)",
    ):
        _config(text)
    fits = _config(text.replace("reserve_tokens = 16000", "reserve_tokens = 24000"))
    assert fits.llm.tiers.thinking() == {"worker": 20000}
