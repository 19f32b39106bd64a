"""The "did you mean" of an unknown settings key: the nearest key its own table knows."""

from __future__ import annotations

import pytest

from pfar.config import Config
from pfar.key_hints import suggestion


@pytest.mark.parametrize(
    ("loc", "said"),
    [
        (("recovery", "shutdown_timeout_secs"), " (did you mean `shutdown_timeout_seconds`?)"),
        (("recoverie",), " (did you mean `recovery`?)"),
        (("loop", "always_alow"), " (did you mean `always_allow`?)"),
        (("hooks", 0, "comand"), " (did you mean `command`?)"),
        (("channels", "telegram", "zzz"), ""),  # a guess only where one is near
        (("recovery", "colour"), ""),
        (("llm", "tiers", "fast", "modle"), ""),  # below a table of names: not followed
        ((), ""),
    ],
)
def test_the_nearest_known_key_is_suggested(loc: tuple[str | int, ...], said: str) -> None:
    assert suggestion(Config, loc) == said
