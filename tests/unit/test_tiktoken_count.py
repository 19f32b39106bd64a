"""tiktoken's counts, offline: the encodings are built in memory from the tables a
package ships, refused unless each has the hash tiktoken expects, with tiktoken's own
patterns and special tokens; known texts give their known tokens; counting writes no
file, sets no variable and opens no socket."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

from pfar.errors import ProviderError
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


@pytest.mark.parametrize("name", tiktoken_count.SHIPPED)
def test_the_encodings_are_tiktokens_own(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tiktoken's own constructor for the encoding, its download served from a cache of
    the test's, gives the same pattern, special tokens and table as pfar's."""
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(
        tiktoken_count.shipped_table(name)
    )
    ours = tiktoken_count.encoding(name)  # first: it refuses a table of another hash
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    theirs = ENCODING_CONSTRUCTORS[name]()  # reads the test's cache: the hash is right
    assert ours._pat_str == theirs["pat_str"]
    assert ours._special_tokens == theirs["special_tokens"]
    assert ours._mergeable_ranks == theirs["mergeable_ranks"]


def test_a_changed_table_is_refused() -> None:
    table = tiktoken_count.shipped_table("cl100k_base")
    tiktoken_count.ranks("cl100k_base", table)
    changed = table.replace(b" 0\n", b" 1\n", 1)
    with pytest.raises(ProviderError, match="cl100k_base table of the bpe-openai package"):
        tiktoken_count.ranks("cl100k_base", changed)


# run in a fresh interpreter with an audit hook in place before pfar is imported: any
# socket, file opened for writing, directory made, file renamed or removed, or variable
# set while a count loads its table is recorded (a socket is refused outright)
_WATCHED = """
import os, sys

seen = []
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def hook(event, args):
    if event.startswith("socket."):
        seen.append(event)
        raise OSError("no network in this test")
    if event == "open" and (
        (isinstance(args[1], str) and set(args[1]) & set("wax+"))
        or (isinstance(args[2], int) and args[2] & WRITES)
    ):
        seen.append(f"open {args[0]} {args[1]!r} {args[2]}")
    elif event.split(".")[0] in {"os", "shutil", "tempfile"} and event not in {
        "os.listdir", "os.scandir", "os.walk", "os.chdir"
    }:
        seen.append(f"{event} {args!r}")


sys.addaudithook(hook)
environ = dict(os.environ)
from pfar.llm.tiktoken_count import count_text

counts = [count_text(name, "tiktoken is great!") for name in ("o200k_base", "cl100k_base")]
loaded = [m for m in ("requests", "urllib3", "bpe_openai") if m in sys.modules]
print(counts, seen, dict(os.environ) == environ, loaded)
"""


def test_counting_writes_nothing_sets_nothing_and_never_reaches_the_network(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"}
    }
    env |= {"HOME": str(empty), "TMPDIR": str(empty), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _WATCHED],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "[6, 6] [] True []", out.stderr
    assert list(empty.iterdir()) == []


def test_first_counts_at_once_share_one_load() -> None:
    """Counts that start together in a fresh process (the kernel's worker threads)
    wait for the one load, and all get the same encoding."""
    script = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from pfar.llm.tiktoken_count import encoding\n"
        "with ThreadPoolExecutor(8) as pool:\n"
        "    found = list(pool.map(lambda _: encoding('o200k_base'), range(8)))\n"
        "print(len({id(e) for e in found}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "1"
