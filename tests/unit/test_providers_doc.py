"""docs/providers.md's failover example is a config pfar reads, with the routes it says."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pfar.config import Config
from pfar.kernel.models import fallbacks
from pfar.llm.failover import Route
from pfar.vault.home import Home

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_the_example_config_gives_the_routes_the_page_describes(tmp_path: Path) -> None:
    (block,) = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.DOTALL)
    config = Config.model_validate(tomllib.loads(block))
    assert fallbacks(config, Home(tmp_path)) == {
        "claude-sonnet-4-5": (
            Route("anthropic", "claude-haiku-4-5"),
            Route("openai", "gpt-4o"),
        ),
        "claude-haiku-4-5": (Route("openai", "gpt-4o-mini"),),
    }
