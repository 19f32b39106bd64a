"""The exception tree drawn in `pfar.errors`' docstring is the tree the classes form:
every class it exports is drawn, once, under the class it derives from."""

from __future__ import annotations

import re

import pfar.errors

# a line of the drawing: its marker ("*", "+", "-", "."), then a class name
_LINE = re.compile(r"^(?P<indent> *)(?P<marker>[*+\-.]) (?P<name>[A-Z]\w*)\b")
_DEPTH = {"*": 0, "+": 1, "-": 2, ".": 3}


def _drawn() -> dict[str, str | None]:
    """Each drawn class -> the class drawn as its parent (None for the root)."""
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in (pfar.errors.__doc__ or "").splitlines():
        found = _LINE.match(line)
        if found is None:
            continue
        depth, name = _DEPTH[found["marker"]], found["name"]
        assert len(found["indent"]) == 2 * depth, f"misaligned in the drawing: {line!r}"
        assert name not in parents, f"{name} is drawn twice"
        assert depth <= len(path), f"{name} is drawn below no class"
        del path[depth:]
        parents[name] = path[-1] if path else None
        path.append(name)
    return parents


def test_every_exported_error_is_drawn() -> None:
    drawn = _drawn()
    exported = {
        name
        for name in pfar.errors.__all__
        if isinstance(getattr(pfar.errors, name), type)
        and issubclass(getattr(pfar.errors, name), BaseException)
    }
    assert not exported - set(drawn), f"not in the drawing: {sorted(exported - set(drawn))}"
    assert not set(drawn) - exported, f"drawn, not exported: {sorted(set(drawn) - exported)}"


def test_each_is_drawn_under_the_class_it_derives_from() -> None:
    for name, parent in _drawn().items():
        cls = getattr(pfar.errors, name)
        if parent is None:
            assert cls is pfar.errors.PfarError
            continue
        bases = [b for b in cls.__bases__ if issubclass(b, pfar.errors.PfarError)]
        assert [b.__name__ for b in bases] == [parent], f"{name} derives from {bases}"
