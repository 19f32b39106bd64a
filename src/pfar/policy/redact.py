"""Redaction: secret values and credential-looking strings never reach the journal or a log."""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable
from typing import Any

from ..vault.secrets import MIN_SECRET_LENGTH
from .secret_forms import encodings, fold, hex_spans, trie_pattern

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


class Redactor:
    """Replaces known secret values (from the vault) and common token shapes with a marker."""

    def __init__(self, secrets: Callable[[], dict[str, str]] | None = None) -> None:
        self._secrets = secrets or (lambda: {})
        self._names: dict[str, str] = {}
        self._raws: dict[str, bytes] = {}
        self._pattern: re.Pattern[str] | None = None
        self.too_short: list[str] = []  # names of stored secrets too short to redact
        self.refresh()

    def refresh(self) -> None:
        names: dict[str, str] = {}  # a form, folded -> the secret's name
        raws: dict[str, bytes] = {}  # a secret's name -> its bytes (found in hex)
        short: list[str] = []
        for name, secret in sorted(self._secrets().items()):
            if len(secret) < MIN_REDACTABLE:
                short.append(name)
                continue
            for form in encodings(secret):
                if len(form) >= MIN_REDACTABLE:
                    names.setdefault(fold(form), name)
            raws[name] = secret.encode()
        # one pass over the text; longer forms first, so a value containing another
        # is replaced whole
        forms = sorted(names, key=len, reverse=True)
        self._pattern = re.compile(trie_pattern(forms)) if forms else None
        self._names = names
        self._raws = raws
        self.too_short = short

    def _spans(self, value: str) -> list[tuple[int, int, str]]:
        """Where known secrets are in `value`, in order, none overlapping."""
        if self._pattern is None:
            return []
        folded = fold(value)
        found = [
            (m.start(), m.end(), self._names[m.group(0)]) for m in self._pattern.finditer(folded)
        ]
        found += hex_spans(folded, self._raws)
        found.sort()
        kept: list[tuple[int, int, str]] = []
        for span in found:
            if kept and span[0] < kept[-1][1]:  # overlaps the one before: one marker
                if span[1] > kept[-1][1]:
                    kept[-1] = (kept[-1][0], span[1], kept[-1][2])
                continue
            kept.append(span)
        return kept

    def text(self, value: str) -> str:
        spans = self._spans(value)
        if spans:
            pieces, at = [], 0
            for start, end, name in spans:
                pieces += [value[at:start], f"[REDACTED:{name}]"]
                at = end
            value = "".join(pieces) + value[at:]
        if _SHAPE_START.search(value) is None:
            return value
        for pattern in _PATTERNS:
            value = pattern.sub(_mask, value)
        return value

    def found(self, value: str) -> list[str]:
        """What `text` would replace in `value`: secret names, and "a credential-looking
        string" for token shapes. Empty when `value` holds nothing to redact."""
        names = {name for _, _, name in self._spans(value)}
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
