"""tiktoken's counts, offline: the tables come from a package, into tiktoken's cache,
checked by tiktoken against its own hashes; known texts give their known tokens."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from pfar.llm import tiktoken_count
from pfar.llm.messages import ChatRequest, Message
from pfar.llm.tokens import ESTIMATE, estimate


def test_known_texts_give_their_known_tokens() -> None:
    # OpenAI's cookbook ("How to count tokens with tiktoken")
    assert tiktoken_count.encoding("cl100k_base").encode("tiktoken is great!") == [
        83, 1609, 5963, 374, 2294, 0,
    ]  # fmt: skip
    assert tiktoken_count.encoding("o200k_base").encode("tiktoken is great!") == [
        83, 8251, 2488, 382, 2212, 0,
    ]  # fmt: skip
    assert tiktoken_count.encoding_name("gpt-4o") == "o200k_base"
    assert tiktoken_count.encoding_name("gpt-4") == "cl100k_base"
    assert tiktoken_count.encoding_name("llama3:8b") is None


def test_a_chat_counts_its_texts_and_the_chat_format() -> None:
    request = ChatRequest(
        model="gpt-4o",
        system="Be brief.",
        messages=(Message("user", "tiktoken is great!"),),
    )
    counted = asyncio.run(tiktoken_count.count(request))
    assert counted is not None and counted.method == "tiktoken:o200k_base"
    system = len(tiktoken_count.encoding("o200k_base").encode("Be brief."))
    # 3 a message (system and user) and 3 for the reply's start
    assert counted.tokens == (3 + system) + (3 + 6) + 3
    unknown = ChatRequest(model="llama3", system="", messages=(Message("user", "hi"),))
    assert asyncio.run(tiktoken_count.count(unknown)) is None
    assert estimate(unknown).method == ESTIMATE


def test_a_fresh_cache_is_filled_without_the_network(tmp_path: Path) -> None:
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pfar.llm.tiktoken_count import count_text;"
            "print(count_text('o200k_base', 'tiktoken is great!'))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "6"
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    table = tmp_path / hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(table.read_bytes()).hexdigest() == (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    )
