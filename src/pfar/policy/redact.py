"""Redaction: secret values and credential-looking strings never reach the journal or a log."""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable
from typing import Any

_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,})"),
    re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{16,})"),
    re.compile(r"\b(xox[abpr]-[A-Za-z0-9\-]{8,})"),
]
_SENSITIVE_KEYS = {"authorization", "password", "token", "api_key", "secret", "cookie"}


class Redactor:
    """Replaces known secret values (from the vault) and common token shapes with a marker."""

    def __init__(self, secrets: Callable[[], dict[str, str]] | None = None) -> None:
        self._secrets = secrets or (lambda: {})
        self._known: dict[str, str] = {}
        self.refresh()

    def refresh(self) -> None:
        # shortest values last so a value containing another is replaced whole
        values = {v: n for n, v in self._secrets().items() if len(v) >= 4}
        self._known = dict(sorted(values.items(), key=lambda kv: -len(kv[0])))

    def text(self, value: str) -> str:
        for secret, name in self._known.items():
            if secret in value:
                value = value.replace(secret, f"[REDACTED:{name}]")
        for pattern in _PATTERNS:
            value = pattern.sub(_mask, value)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: (
                    "[REDACTED]"
                    if str(k).lower() in _SENSITIVE_KEYS
                    and isinstance(v, str)
                    and "{{secret:" not in v
                    else self.value(v)
                )
                for k, v in value.items()
            }
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
