"""OpenAI models' token counts with tiktoken, offline.

tiktoken's own loader fetches its BPE tables from the internet the first time an
encoding is used and keeps them in a cache directory, which pfar never lets it do: a
cache in a shared temporary directory is a file another user can plant, a damaged
cached file sends tiktoken to the network with no timeout, and its directory is
chosen through an environment variable that every thread and every command started
shares. So pfar builds the encoding itself, in memory, from the tables the
`bpe-openai` package ships (gzipped) inside its wheel: each table must have the
sha256 tiktoken expects for it (the hash in tiktoken's `openai_public`), else it is
refused, and the split pattern and special tokens are tiktoken's. No file is
written, no variable set, no socket opened. A table that cannot be had (the package
missing, a table whose hash is not tiktoken's) leaves the estimate to count.

A chat's count follows OpenAI's published rule for chat messages: each message's
text, plus 3 tokens a message (its role and framing) and 3 for the reply's start.
Tool schemas and tool calls are counted as the JSON they are sent as; OpenAI does
not publish how it frames them, so that part is close, not exact.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import gzip
import hashlib
import importlib.util
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ProviderError
from .messages import ChatRequest
from .tokens import TokenCount

if TYPE_CHECKING:
    from tiktoken import Encoding

log = logging.getLogger("pfar.llm")

PER_MESSAGE = 3
REPLY_PRIMING = 3


@dataclass(frozen=True, slots=True)
class Spec:
    """What tiktoken's `openai_public` builds an encoding from, but the table itself."""

    sha256: str  # of the uncompressed table, as tiktoken checks it
    pat_str: str
    special_tokens: dict[str, int]


def _specs() -> dict[str, Spec]:
    """The encodings whose tables bpe-openai ships, as tiktoken_ext/openai_public.py
    defines them: the hashes and patterns are written there inside the functions that
    download the tables, so they are copied here (a test holds them to tiktoken's)."""
    from tiktoken_ext.openai_public import (  # type: ignore[import-untyped]
        ENDOFPROMPT,
        ENDOFTEXT,
        FIM_MIDDLE,
        FIM_PREFIX,
        FIM_SUFFIX,
    )

    o200k_pat = "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    )
    return {
        "o200k_base": Spec(
            "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            o200k_pat,
            {ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
        ),
        "cl100k_base": Spec(
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            "|".join(
                [
                    r"""'(?i:[sdmt]|ll|ve|re)""",
                    r"""[^\r\n\p{L}\p{N}]?+\p{L}++""",
                    r"""\p{N}{1,3}+""",
                    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+""",
                    r"""\s++$""",
                    r"""\s*[\r\n]""",
                    r"""\s+(?!\S)""",
                    r"""\s""",
                ]
            ),
            {
                ENDOFTEXT: 100257,
                FIM_PREFIX: 100258,
                FIM_MIDDLE: 100259,
                FIM_SUFFIX: 100260,
                ENDOFPROMPT: 100276,
            },
        ),
    }


SHIPPED = ("o200k_base", "cl100k_base")

# one load per encoding per process: the first count loads (under a second) while any other
# waits for it, rather than each thread parsing the table again; a refused table is
# remembered too, so it is not read and hashed again for every turn
_lock = threading.Lock()
_loaded: dict[str, Encoding | ProviderError] = {}


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
    return name if name in SHIPPED else None


def shipped_table(name: str) -> bytes:
    """The table bpe-openai ships for encoding `name`, uncompressed. The package is
    found, never imported: importing it parses every table it has (about 1 s)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError("the bpe-openai package is not installed: reinstall pfar")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return gzip.decompress((folder / "data" / f"{name}.tiktoken.gz").read_bytes())


def ranks(name: str, table: bytes) -> dict[bytes, int]:
    """The mergeable ranks of `table` (tiktoken's format: a base64 token and its rank a
    line), refused unless its sha256 is the one tiktoken expects for encoding `name`."""
    expected = _specs()[name].sha256
    found = hashlib.sha256(table).hexdigest()
    if found != expected:
        raise ProviderError(
            f"the {name} table of the bpe-openai package has sha256 {found}, not the "
            f"{expected} tiktoken expects: reinstall bpe-openai (token counts are "
            f"estimated meanwhile)"
        )
    out: dict[bytes, int] = {}
    for number, line in enumerate(table.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            out[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:  # unreachable with the right hash
            raise ProviderError(f"line {number} of the {name} table is malformed") from exc
    return out


def encoding(name: str) -> Encoding:
    """tiktoken's encoding `name`, built in memory from the table bpe-openai ships."""
    with _lock:
        found = _loaded.get(name)
        if found is None:
            try:
                found = _build(name)
            except ProviderError as exc:
                found = exc
            _loaded[name] = found
    if isinstance(found, ProviderError):
        raise found
    return found


def _build(name: str) -> Encoding:
    import tiktoken

    spec = _specs()[name]
    try:
        table = shipped_table(name)
    except (OSError, EOFError) as exc:  # BadGzipFile is an OSError
        raise ProviderError(f"the {name} table of the bpe-openai package: {exc}") from exc
    return tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks(name, table),
        special_tokens=spec.special_tokens,
    )


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
    Off the event loop: the first count loads the table, and a long conversation takes
    a while to encode."""
    name = encoding_name(request.model)
    if name is None:
        return None
    try:
        tokens = await asyncio.to_thread(count_request, name, request)
    except Exception as exc:  # a table missing or refused: the estimate serves
        log.warning("tiktoken could not count for %s (%s): estimated instead", request.model, exc)
        return None
    return TokenCount(tokens, f"tiktoken:{name}")
