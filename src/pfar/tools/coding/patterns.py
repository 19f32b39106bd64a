"""Glob patterns as Glob, Grep's fallback and the protected paths read them.

`*` matches within one path segment, `**` any number of segments (none included), `?`
one character, `[abc]`/`[!abc]` a class, `{a,b}` either alternative. Dotfiles match
like any other name.
"""

from __future__ import annotations

import re


def expand_braces(pattern: str) -> list[str]:
    """`a.{py,md}` -> [`a.py`, `a.md`]; nested and repeated braces expand too."""
    depth, start = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = pattern[start + 1 : i]
                head, tail = pattern[:start], pattern[i + 1 :]
                return [
                    expanded
                    for choice in _split_top(inner)
                    for expanded in expand_braces(head + choice + tail)
                ]
    return [pattern]


def _split_top(inner: str) -> list[str]:
    parts, depth, last = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[last:i])
            last = i + 1
    parts.append(inner[last:])
    return parts


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex matching the relative, `/`-separated paths `pattern` names."""
    return re.compile("|".join(f"(?:{_one(p)})" for p in expand_braces(pattern)), re.DOTALL)


def _one(pattern: str) -> str:
    segments = pattern.strip("/").split("/")
    out = []
    for n, seg in enumerate(segments):
        last = n == len(segments) - 1
        if seg == "**":
            out.append(".*" if last else "(?:[^/]*/)*")
        else:
            out.append(_segment(seg) + ("" if last else "/"))
    return "".join(out) + r"\Z"


def _segment(seg: str) -> str:
    out, i = [], 0
    while i < len(seg):
        ch = seg[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and (end := seg.find("]", i + 2)) != -1:
            body = seg[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)
