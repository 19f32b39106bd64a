"""The root of the tree: every error pfar raises on purpose is a PfarError."""

from __future__ import annotations


class PfarError(Exception):
    """Base of every error pfar raises on purpose."""
