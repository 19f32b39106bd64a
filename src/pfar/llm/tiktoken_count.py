"""OpenAI models' token counts with tiktoken, offline.

tiktoken downloads its BPE tables from the internet the first time an encoding is
used, and caches them under `TIKTOKEN_CACHE_DIR` by the sha1 of their address. pfar
never downloads at run time: the tables come from the `bpe-openai` package, which ships
them (gzipped) inside its wheel. They are written, once, into tiktoken's cache under
the names tiktoken looks for, and tiktoken checks each against the sha256 it expects
(its own hash, not ours), so the tokenizer is tiktoken's, table for table. The cache
is `TIKTOKEN_CACHE_DIR` when the owner set one, else `pfar-tiktoken-<uid>` in the
system's temporary directory. A table that cannot be had (the package missing, a
damaged file tiktoken would fetch again) leaves the estimate to count.

A chat's count follows OpenAI's published rule for chat messages: each message's
text, plus 3 tokens a message (its role and framing) and 3 for the reply's start.
Tool schemas and tool calls are counted as the JSON they are sent as; OpenAI does
not publish how it frames them, so that part is close, not exact.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import os
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from .messages import ChatRequest
from .tokens import TokenCount

log = logging.getLogger("pfar.llm")

_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
# the encodings whose tables bpe-openai ships; the sha256 tiktoken checks them against
_SHIPPED = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
PER_MESSAGE = 3
REPLY_PRIMING = 3


def encoding_name(model: str) -> str | None:
    """The tiktoken encoding of `model`, when tiktoken knows it and its table is here."""
    try:
        import tiktoken.model
    except ImportError:
        return None
    try:
        name = tiktoken.model.encoding_name_for_model(model)
    except KeyError:
        return None
    return name if name in _SHIPPED else None


@cache
def encoding(name: str) -> Any:
    """tiktoken's encoding `name`, its table taken from the package that ships it."""
    import tiktoken

    chosen = os.environ.get("TIKTOKEN_CACHE_DIR")  # the owner's own cache, if set
    cache_dir = Path(chosen or _own_cache())
    url = f"{_BASE}{name}.tiktoken"
    target = cache_dir / hashlib.sha1(url.encode()).hexdigest()  # tiktoken's key
    if not target.exists():
        shipped = resources.files("bpe_openai.data") / f"{name}.tiktoken.gz"
        data = gzip.decompress(shipped.read_bytes())
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.replace(target)  # whole or not at all, for tiktoken to read
    if chosen:
        return tiktoken.get_encoding(name)
    # tiktoken reads the variable while it loads the table, and only then: set for the
    # load alone, so the processes tasks start do not inherit it
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    try:
        return tiktoken.get_encoding(name)
    finally:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)


def _own_cache() -> str:
    return str(Path(tempfile.gettempdir()) / f"pfar-tiktoken-{os.getuid()}")


def count_text(name: str, text: str) -> int:
    return len(encoding(name).encode(text, disallowed_special=()))


def count_request(name: str, request: ChatRequest) -> int:
    enc = encoding(name)

    def n(text: str) -> int:
        return len(enc.encode(text, disallowed_special=())) if text else 0

    total = REPLY_PRIMING
    if request.system:
        total += PER_MESSAGE + n(request.system)
    for m in request.messages:
        total += PER_MESSAGE + n(m.text)
        total += sum(n(c.name) + n(json.dumps(c.input)) for c in m.tool_calls)
        # each result is a message of its own ("role": "tool")
        total += sum(PER_MESSAGE + n(r.content) for r in m.tool_results)
    if request.tools:
        total += n(
            json.dumps(
                [
                    {"name": t.name, "description": t.description, "parameters": t.input_schema}
                    for t in request.tools
                ]
            )
        )
    return total


async def count(request: ChatRequest) -> TokenCount | None:
    """The request's input tokens by tiktoken, or None for a model it does not know.
    Off the event loop: a long conversation takes a while to encode."""
    name = encoding_name(request.model)
    if name is None:
        return None
    try:
        tokens = await asyncio.to_thread(count_request, name, request)
    except Exception as exc:  # a table missing or damaged: the estimate serves
        log.warning("tiktoken could not count for %s (%s): estimated instead", request.model, exc)
        return None
    return TokenCount(tokens, f"tiktoken:{name}")
