"""The model providers as the owner is shown them (`pfar providers`): each one's role
and its circuit breaker (docs/providers.md). A breaker lives in the kernel's memory and
starts closed, so without a kernel the providers config.toml names are listed with no
state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...config.llm import LLMConfig
from .arguments import NoArgs
from .command import Command
from .wire import Wire

if TYPE_CHECKING:
    from ...llm.proxy import InferenceProxy


@dataclass(frozen=True, slots=True)
class ProviderView:
    name: str  # as config.toml names it: [llm] provider, "local", [llm.providers.NAME]
    role: str  # default / local / fallback
    # closed (calls go to it) / open (down: calls fail over or wait) / half_open (one
    # call probes it), or "not running" (no kernel runs: a breaker starts closed)
    state: str
    failures: int  # counted failures in a row
    retry_in_seconds: float | None  # until a call may go again; None: a probe is out
    last_error: str | None  # the last counted failure, redacted


def live(proxy: InferenceProxy, redact: Callable[[str], str]) -> list[ProviderView]:
    """A running kernel's providers and their breakers now."""
    return [
        ProviderView(
            name,
            role,
            str(b.state),
            b.failures,
            None if b.retry_in is None else round(b.retry_in, 1),
            redact(b.last_error) if b.last_error else None,
        )
        for name, role, b in proxy.health()
    ]


def configured(llm: LLMConfig) -> list[ProviderView]:
    """The providers config.toml names, with no kernel to hold their breakers."""
    named: list[tuple[str, str]] = [(llm.provider, "default")]
    if llm.local is not None and llm.provider != "scripted":
        named.append(("local", "local"))
    if llm.provider != "scripted":
        named += [(name, "fallback") for name in llm.providers]
    return [ProviderView(name, role, "not running", 0, None, None) for name, role in named]


# the control socket's `providers` op (requests.py lists it with the others)
PROVIDERS = Command(
    "providers",
    NoArgs,
    lambda o, _: o.providers(),
    while_shutting_down=True,
    reply=Wire(list[ProviderView]),
)
