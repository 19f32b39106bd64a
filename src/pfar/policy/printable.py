"""Text from outside (a web page, a model, a command's output) made safe to show on a terminal.

A terminal obeys the control characters it is sent: an escape sequence in a fetched page
could retitle the window, clear the screen, or move the cursor to rewrite a line that
pfar printed. Everything pfar prints for people goes through `printable` first.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the Unicode characters that reorder or break lines on
# screen (bidi overrides and isolates, line and paragraph separators). Tab and newline
# are left alone here; newlines are handled by `printable` itself.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, indent: str | None = None) -> str:
    """`text` with every control character shown as a visible escape (ESC as `\\x1b`).

    With `indent` None, newlines are escaped too: the text stays on one line. Otherwise
    newlines are kept and every line after the first starts with `indent`, so outside
    text cannot begin a line where pfar's own lines begin (say, a fake approval prompt).
    A CR LF pair counts as a newline; a lone CR (which returns to the start of the line
    and overwrites it) is escaped.
    """
    text = _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))
    if indent is None:
        return text.replace("\n", "\\n")
    return text.replace("\n", "\n" + indent)
