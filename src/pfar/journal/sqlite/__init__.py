"""The journal on SQLite: one file in the vault, written by one kernel (the default)."""

from .sessions import open_sessions, sessions_on
from .store import open_journal, open_readonly

__all__ = ["open_journal", "open_readonly", "open_sessions", "sessions_on"]
