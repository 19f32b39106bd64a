"""What the model reads: text capped to a size it can take, with a note saying what was cut."""

from __future__ import annotations

from typing import Final

# the most text one tool result shows the model (seed 001: "Truncate if > 30k chars")
MAX_CHARS: Final = 30_000


def cap_head_tail(text: str, limit: int = MAX_CHARS, *, hint: str = "") -> tuple[str, int]:
    """`text` within `limit` characters, keeping its head and its tail (a command's
    first lines say what it did, its last ones how it ended), and how many were cut."""
    if len(text) <= limit:
        return text, 0
    half = limit // 2
    cut = len(text) - 2 * half
    note = f"\n\n[... {cut:,} characters cut here{hint} ...]\n\n"
    return text[:half] + note + text[-half:], cut


def cap_head(text: str, limit: int = MAX_CHARS, *, hint: str = "") -> tuple[str, int]:
    """`text` within `limit` characters, cut at a line's end, with a note; and how many
    characters were cut."""
    if len(text) <= limit:
        return text, 0
    kept = text[:limit]
    end = kept.rfind("\n")
    if end > limit // 2:
        kept = kept[: end + 1]
    cut = len(text) - len(kept)
    return kept + f"\n[... {cut:,} more characters not shown{hint}]", cut


def looks_binary(head: bytes) -> bool:
    """A NUL byte in a file's first block: what git and grep take as binary."""
    return b"\0" in head
