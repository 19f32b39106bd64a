"""The forms a secret takes in a text, and finding them in one pass.

Redaction is a second line (the guard is that no task can read the vault): it
catches a secret echoed back as it is, quoted, escaped or encoded the usual ways,
in any letter case. Every form is matched in a text folded to lower case (ASCII
letters only, so positions do not move), by one regular expression shaped as a
trie; hex is found as runs of hex digits that are decoded and searched for the
secret's bytes, so spaces, colons, line breaks and `\\x` between the pairs do not
hide it. Not caught: the secret split by anything else (a line-wrapped base64 or
base32 text, a `hexdump -C` column), compressed, encrypted, or encoded twice.
"""

from __future__ import annotations

import base64
import codecs
import html
import json
import re
import shlex
import string
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus

# length-keeping: a match's place in the folded text is its place in the text
_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# eight or more hex pairs, run together or set apart by spaces, line breaks, colons,
# commas, `\x` or `0x` (in a folded text)
_HEX_RUN = re.compile(r"[0-9a-f]{2}(?:[\s:,\\x]{0,8}(?:0x)?[0-9a-f]{2}){7,}[0-9a-f]?")
_NOT_HEX = re.compile(r"[^0-9a-f]")
_HEX_DIGITS = frozenset("0123456789abcdef")


def fold(text: str) -> str:
    """`text` with its ASCII letters in lower case, every character where it was."""
    return text.translate(_FOLD)


def encodings(value: str) -> set[str]:
    """The forms of `value` matched as text: as is, URL-, JSON- (once and twice), HTML-
    and shell-quoted, base64 (standard and URL-safe) and base32, padded or not, and the
    part of a longer encoded text (`user:secret` in Basic auth) that only the secret
    decides, reversed, and rot13. Hex is found apart (`hex_spans`)."""
    forms = {value, html.escape(value), shlex.quote(value), value.replace("'", "'\"'\"'")}
    for url in (quote(value, safe=""), quote(value), quote_plus(value)):
        forms |= {url, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url)}
    for ascii_only in (True, False):
        once = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        forms |= {once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]}
    raw = value.encode()
    for b64 in (base64.b64encode, base64.urlsafe_b64encode):
        forms |= {b64(raw).decode(), b64(raw).decode().rstrip("=")}
        forms |= _aligned(b64, raw, block=3, bits=6)
    forms |= {base64.b32encode(raw).decode(), base64.b32encode(raw).decode().rstrip("=")}
    forms |= _aligned(base64.b32encode, raw, block=5, bits=5)
    forms |= {value[::-1], codecs.encode(value, "rot13")}
    return forms


def _aligned(encode: Callable[[bytes], bytes], raw: bytes, *, block: int, bits: int) -> set[str]:
    """The characters of `encode(prefix + raw + suffix)` that only `raw` decides, for
    each place `raw` can start at inside an encoding block of `block` bytes."""
    forms = set()
    for shift in range(block):
        encoded = encode(b"\0" * shift + raw).decode().rstrip("=")
        first, end = -(-8 * shift // bits), (8 * shift + 8 * len(raw)) // bits
        forms.add(encoded[first:end])
    return forms


def trie_pattern(forms: list[str]) -> str:
    """One regular expression matching any of `forms`, the longest first, shaped as a
    trie: at each place in a text only the branches sharing its next characters are
    tried, so the time stays linear in the text however many forms there are."""
    root: dict[str, Any] = {}
    for form in forms:
        node = root
        for ch in form:
            node = node.setdefault(ch, {})
        node[""] = {}  # a form ends here

    def render(node: dict[str, Any]) -> str:
        run = []  # a chain of single characters is one run of literals, not nesting
        while len(node) == 1 and "" not in node:
            ((ch, node),) = node.items()
            run.append(re.escape(ch))
        branches = [re.escape(ch) + render(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return "".join(run)
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # the longer branches first (greedy), then the form ending here
            body = f"(?:{body})?" if len(branches) == 1 else body + "?"
        return "".join(run) + body

    return render(root)


def hex_spans(folded: str, secrets: dict[str, bytes]) -> Iterator[tuple[int, int, str]]:
    """(start, end, name) of each secret's bytes written in hex in `folded`."""
    for run in _HEX_RUN.finditer(folded):
        text = run.group(0).replace("0x", "__")  # `0x` marks a pair, it is not one
        digits = _NOT_HEX.sub("", text)
        places: list[int] | None = None
        for odd in (0, 1):  # a secret may start at either digit of a run written solid
            data = bytes.fromhex(digits[odd : len(digits) - (len(digits) - odd) % 2])
            for name, raw in secrets.items():
                at = data.find(raw)
                while at >= 0:
                    if places is None:
                        places = [i for i, c in enumerate(text) if c in _HEX_DIGITS]
                    first = odd + 2 * at
                    start = run.start() + places[first]
                    end = run.start() + places[first + 2 * len(raw) - 1] + 1
                    if folded[max(0, start - 2) : start] in ("\\x", "0x"):
                        start -= 2  # its `\x` or `0x` with it
                    yield start, end, name
                    at = data.find(raw, at + 1)
