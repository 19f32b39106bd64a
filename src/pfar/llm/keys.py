"""An API key for a provider: the key itself, or where to read it at each call."""

from __future__ import annotations

from collections.abc import Callable

# A callable is read at every call: a key changed in the vault (`pfar secret set` on a
# running kernel) is used from the next call on, without a restart.
ApiKey = str | Callable[[], str]


def read_key(key: ApiKey) -> str:
    return key if isinstance(key, str) else key()
