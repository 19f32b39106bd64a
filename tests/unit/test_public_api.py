from __future__ import annotations

import types

import pfar


def test_public_api_is_exactly_all() -> None:
    public = {
        name
        for name, value in vars(pfar).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert len(set(pfar.__all__)) == len(pfar.__all__)  # ruff (RUF022) keeps it sorted
    assert set(pfar.__all__) == public
