"""Building a chat provider by its config name (the SDKs are imported only when used)."""

from __future__ import annotations

from .keys import ApiKey
from .proxy import ChatModel
from .retry import RetryPolicy


def build_chat_provider(
    name: str, api_key: ApiKey, *, base_url: str | None, timeout: float, policy: RetryPolicy
) -> ChatModel:
    if name == "anthropic":
        from .anthropic_provider import AnthropicProvider

        return AnthropicProvider(api_key, base_url=base_url, timeout=timeout, policy=policy)
    if name == "openai":
        from .openai_provider import OpenAIProvider

        return OpenAIProvider(api_key, base_url=base_url, timeout=timeout, policy=policy)
    raise ValueError(f"unknown provider {name!r}")
