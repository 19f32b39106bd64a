"""Building the model provider the kernel thinks with, from `[llm]`.

The scripted provider replays a file; a real provider (Anthropic, or any
OpenAI-compatible server) sits behind the inference proxy, which every call
passes through. API keys come from secrets.db, never from config.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config
from ..errors import ConfigError
from ..llm.model_provider import ModelProvider
from ..llm.provider import Provider
from ..llm.proxy import CallRecord, ChatProvider, InferenceProxy, Price, RateLimiter
from ..llm.retry import RetryPolicy
from ..llm.scripted import ScriptedChatProvider, ScriptedProvider
from ..llm.sdk_providers import build_chat_provider
from ..vault.home import Home


def build_provider(
    config: Config,
    *,
    home: Home,
    secret: Callable[[str], str | None],
    tool_descriptions: dict[str, str],
    on_call: Callable[[CallRecord], None],
) -> Provider:
    llm = config.llm
    if llm.provider == "scripted":
        # a local stand-in for a model: behind the same proxy, never "cloud"
        scripted = ScriptedChatProvider(ScriptedProvider.load(home.root / llm.script))
        proxy = InferenceProxy(
            {"scripted": scripted},
            default="scripted",
            local="scripted",
            limiter=RateLimiter(
                llm.requests_per_minute or 10**9,
                llm.tokens_per_minute or 10**12,
                window=llm.rate_window_seconds,
            ),
            on_call=on_call,
        )
        return ModelProvider(
            proxy,
            model=llm.model or "scripted",
            max_tokens=llm.max_tokens,
            tool_descriptions=tool_descriptions,
            remote=False,
        )

    def api_key(name: str, key: str) -> str:
        value = secret(name)
        if value is None:
            raise ConfigError(
                str(home.config),
                key,
                f"the API key secret {name!r} is not in the vault; store it with "
                f"`pfar secret set {name}` (it reads the key from stdin)",
            )
        return value

    policy = RetryPolicy(
        backoff=tuple(llm.retry.backoff_seconds),
        overloaded_wait=llm.retry.overloaded_wait_seconds,
        max_retries=llm.retry.max_retries,
    )
    providers: dict[str, ChatProvider] = {
        llm.provider: build_chat_provider(
            llm.provider,
            api_key(llm.key_secret, "llm.api_key_secret"),
            base_url=llm.base_url or None,
            timeout=llm.timeout_seconds,
            policy=policy,
        )
    }
    local_name = None
    if llm.local is not None:
        key = (
            api_key(llm.local.api_key_secret, "llm.local.api_key_secret")
            if llm.local.api_key_secret
            else "local"
        )
        providers["local"] = build_chat_provider(
            llm.local.provider,
            key,
            base_url=llm.local.base_url,
            timeout=llm.timeout_seconds,
            policy=policy,
        )
        local_name = "local"
    proxy = InferenceProxy(
        providers,
        default=llm.provider,
        local=local_name,
        cloud_ceiling=llm.cloud_ceiling,
        limiter=RateLimiter(
            llm.requests_per_minute or 50,
            llm.tokens_per_minute or 200_000,
            window=llm.rate_window_seconds,
        ),
        prices={m: Price(p.input, p.output) for m, p in llm.prices.items()},
        on_call=on_call,
        models={"local": llm.local.model} if llm.local is not None else None,
    )
    return ModelProvider(
        proxy,
        model=llm.model,
        max_tokens=llm.max_tokens,
        tool_descriptions=tool_descriptions,
        tiers=llm.tiers.model_dump(),
    )
