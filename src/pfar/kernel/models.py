"""Building the model the kernel thinks with, from `[llm]`: the inference proxy, with
the configured chat model behind it.

The scripted provider answers from a file; a real provider (Anthropic, or any
OpenAI-compatible server) sits behind the inference proxy, which every call
passes through. API keys come from secrets.db, never from config, and are read
at every call: `pfar secret set` on a running kernel takes effect at the next
call. A key the provider refuses (401) fails the call at once, naming the
secret to fix and the command that fixes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..config import Config
from ..errors import ConfigError, ProviderError
from ..llm.breaker import Health
from ..llm.events import EventSink
from ..llm.failover import Failover, Route, parse_fallback
from ..llm.messages import ChatRequest, ChatResponse
from ..llm.proxy import CallRecord, ChatModel, InferenceProxy, Price, RateLimiter
from ..llm.retry import ErrorKind, ProviderCallFailed, RetryPolicy
from ..llm.script_file import load_scripted_model
from ..llm.sdk_providers import build_chat_provider
from ..llm.tokens import CountsTokens, TokenCount
from ..vault.home import Home


class _NamesItsKey:
    """A provider whose 401 says which secret holds the refused key and how to replace it."""

    def __init__(self, inner: ChatModel, secret_name: str) -> None:
        self._inner, self._secret_name = inner, secret_name

    async def chat(
        self, request: ChatRequest, *, on_event: EventSink | None = None
    ) -> ChatResponse:
        try:
            return await self._inner.chat(request, on_event=on_event)
        except ProviderCallFailed as exc:
            if exc.kind is not ErrorKind.unauthorized:
                raise
            name = self._secret_name
            raise ProviderError(
                f"{exc}; the API key in secret {name!r} was refused: store the right key "
                f"with `pfar secret set {name}` (it reads the key from stdin); the running "
                "kernel uses it from the next call"
            ) from None

    async def count_tokens(self, request: ChatRequest) -> TokenCount | None:
        if not isinstance(self._inner, CountsTokens):
            return None
        return await self._inner.count_tokens(request)


def build_model(
    config: Config,
    *,
    home: Home,
    secret: Callable[[str], str | None],
    on_call: Callable[[CallRecord], None],
    on_health: Callable[[Health], Awaitable[None]] | None = None,
) -> InferenceProxy:
    llm = config.llm
    if llm.provider == "scripted":
        return scripted_proxy(load_scripted_model(home.root / llm.script), config, on_call=on_call)

    def api_key(name: str, key: str) -> Callable[[], str]:
        """The key as the vault holds it at each call; missing: refused, naming the secret."""

        def read() -> str:
            value = secret(name)
            if value is None:
                raise ConfigError(
                    str(home.config),
                    key,
                    f"the API key secret {name!r} is not in the vault; store it with "
                    f"`pfar secret set {name}` (it reads the key from stdin)",
                )
            return value

        read()  # at startup: a kernel without its key does not start
        return read

    policy = RetryPolicy(
        backoff=tuple(llm.retry.backoff_seconds),
        overloaded_wait=llm.retry.overloaded_wait_seconds,
        max_retries=llm.retry.max_retries,
    )
    providers: dict[str, ChatModel] = {
        llm.provider: _NamesItsKey(
            build_chat_provider(
                llm.provider,
                api_key(llm.key_secret, "llm.api_key_secret"),
                base_url=llm.base_url or None,
                timeout=llm.timeout_seconds,
                policy=policy,
            ),
            llm.key_secret,
        )
    }
    local_name = None
    if llm.local is not None:
        local = build_chat_provider(
            llm.local.provider,
            (
                api_key(llm.local.api_key_secret, "llm.local.api_key_secret")
                if llm.local.api_key_secret
                else "local"  # local servers often need none, but the SDK wants one
            ),
            base_url=llm.local.base_url,
            timeout=llm.timeout_seconds,
            policy=policy,
        )
        providers["local"] = (
            _NamesItsKey(local, llm.local.api_key_secret) if llm.local.api_key_secret else local
        )
        local_name = "local"
    for name, other in llm.providers.items():  # the fallbacks' other providers
        secret_name = other.api_key_secret or f"{name}_api_key"
        providers[name] = _NamesItsKey(
            build_chat_provider(
                other.type,
                api_key(secret_name, f"llm.providers.{name}.api_key_secret"),
                base_url=other.base_url or None,
                timeout=llm.timeout_seconds,
                policy=policy,
            ),
            secret_name,
        )
    return InferenceProxy(
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
        model=llm.model,
        tiers=llm.tiers.models(),
        thinking=llm.tiers.thinking(),
        max_tokens=llm.max_tokens,
        failover=Failover(
            providers,
            primary=llm.provider,
            fallbacks=fallbacks(config, home),
            failures=llm.breaker.failures,
            open_seconds=llm.breaker.open_seconds,
            wait_seconds=llm.breaker.wait_seconds,
            on_health=on_health,
        ),
    )


def fallbacks(config: Config, home: Home) -> dict[str, tuple[Route, ...]]:
    """Each tier's model and its fallbacks, in order; one model, one list."""
    llm = config.llm
    out: dict[str, tuple[Route, ...]] = {}
    named: dict[str, str] = {}
    for tier in ("cheap", "worker", "planner"):
        settings = getattr(llm.tiers, tier)
        if not settings.fallback:
            continue
        model = settings.model or llm.model
        routes = tuple(parse_fallback(entry, llm.provider) for entry in settings.fallback)
        if model in out and out[model] != routes:
            raise ConfigError(
                str(home.config),
                f"llm.tiers.{tier}.fallback",
                f"model {model!r} has other fallbacks in llm.tiers.{named[model]}: a model's "
                "calls fail over one way, so give both tiers the same list",
            )
        out[model], named[model] = routes, tier
    return out


def scripted_proxy(
    model: ChatModel, config: Config, *, on_call: Callable[[CallRecord], None]
) -> InferenceProxy:
    """A model that answers in-process (a scripted one) behind the proxy: the same path as
    a real one (rate limit, accounting), never "cloud", no request journaled as sent."""
    llm = config.llm
    return InferenceProxy(
        {"scripted": model},
        default="scripted",
        local="scripted",
        limiter=RateLimiter(
            llm.requests_per_minute or 10**9,
            llm.tokens_per_minute or 10**12,
            window=llm.rate_window_seconds,
        ),
        prices={m: Price(p.input, p.output) for m, p in llm.prices.items()},  # as a provider's
        on_call=on_call,
        model=llm.model or "scripted",
        tiers=llm.tiers.models(),  # a script sees which tier asked (request.model)
        thinking=llm.tiers.thinking(),
        max_tokens=llm.max_tokens,
        remote=False,
    )
