"""Redaction: secret values and credential-looking strings never reach the journal or a log."""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import shlex
import traceback
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

from ..vault.secrets import MIN_SECRET_LENGTH

_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,})"),
    re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{16,})"),
    re.compile(r"\b(xox[abpr]-[A-Za-z0-9\-]{8,})"),
]
# what every token shape above starts with (case folded: a superset): a text without one
# is scanned once, not once per shape
_SHAPE_START = re.compile(r"(?i)bearer|sk-|gh[pousr]_|xox[abpr]-")
_SENSITIVE_KEYS = {"authorization", "password", "token", "api_key", "secret", "cookie"}

# A shorter value would be found in ordinary text ("1234", "test") and mangle it: pfar
# refuses to store one, and one stored before that rule is reported, not redacted.
MIN_REDACTABLE = MIN_SECRET_LENGTH


def encodings(value: str) -> set[str]:
    """The forms a secret takes when a server or a tool echoes it back: as is, URL-,
    JSON- (once and twice), HTML- and shell-quoted, and base64, including the part of
    a longer base64 text (`user:secret` in Basic auth) that only the secret decides."""
    forms = {value, html.escape(value), shlex.quote(value), value.replace("'", "'\"'\"'")}
    for url in (quote(value, safe=""), quote(value), quote_plus(value)):
        forms |= {url, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url)}
    for ascii_only in (True, False):
        once = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        forms |= {once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]}
    raw = value.encode()
    for b64 in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(b64(raw).decode())
        for shift in (0, 1, 2):  # where the secret starts, modulo 3 bytes
            encoded = b64(b"\0" * shift + raw).decode().rstrip("=")
            first, end = -(-8 * shift // 6), (8 * shift + 8 * len(raw)) // 6
            forms.add(encoded[first:end])
    return {f for f in forms if len(f) >= MIN_REDACTABLE}


class Redactor:
    """Replaces known secret values (from the vault) and common token shapes with a marker."""

    def __init__(self, secrets: Callable[[], dict[str, str]] | None = None) -> None:
        self._secrets = secrets or (lambda: {})
        self._names: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None
        self.too_short: list[str] = []  # names of stored secrets too short to redact
        self.refresh()

    def refresh(self) -> None:
        names: dict[str, str] = {}
        short: list[str] = []
        for name, secret in sorted(self._secrets().items()):
            if len(secret) < MIN_REDACTABLE:
                short.append(name)
                continue
            for form in encodings(secret):
                names.setdefault(form, name)
        # one pass over the text; longer forms first, so a value containing another
        # is replaced whole
        forms = sorted(names, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None
        self._names = names
        self.too_short = short

    def text(self, value: str) -> str:
        if self._pattern is not None:
            value = self._pattern.sub(lambda m: f"[REDACTED:{self._names[m.group(0)]}]", value)
        if _SHAPE_START.search(value) is None:
            return value
        for pattern in _PATTERNS:
            value = pattern.sub(_mask, value)
        return value

    def found(self, value: str) -> list[str]:
        """What `text` would replace in `value`: secret names, and "a credential-looking
        string" for token shapes. Empty when `value` holds nothing to redact."""
        names = set()
        if self._pattern is not None:
            names = {self._names[m.group(0)] for m in self._pattern.finditer(value)}
        shapes = any(pattern.search(value) for pattern in _PATTERNS)
        return sorted(names) + (["a credential-looking string"] if shapes else [])

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if isinstance(v, str):
                    sensitive = str(k).lower() in _SENSITIVE_KEYS and "{{secret:" not in v
                    out[k] = "[REDACTED]" if sensitive else self.text(v)
                else:
                    out[k] = v if v is None or isinstance(v, bool | int | float) else self.value(v)
            return out
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


class RedactingFilter(logging.Filter):
    """Redacts every record of the logger it is attached to, traceback included."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redactor.text(record.getMessage())
        record.args = None
        if record.exc_info:
            record.exc_text = self._redactor.text(
                "".join(traceback.format_exception(*record.exc_info))
            )
            record.exc_info = None
        return True


def _mask(m: re.Match[str]) -> str:
    if m.lastindex and m.lastindex >= 1 and m.group(0) != m.group(1):
        return m.group(1) + "[REDACTED]"
    return "[REDACTED]"
