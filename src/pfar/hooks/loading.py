"""The handlers a kernel fires: `[[hooks]]` in config.toml, then the home's hooks
directory (`hooks/<HookPoint>/<executable>`, in name order), then the `pfar.hooks`
entry points of installed packages (named `<HookPoint>` or `<HookPoint>.<anything>`).

Loaded once at start, so a bad handler stops the start naming it: a module that
cannot be imported, a directory named after no hook point, a handler file that
another user could change.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path

from ..config import HookConfig
from ..errors import ConfigError
from ..hook_points import HookPoint, parse_point
from ..vault.perms import check_private
from .handlers import Handler, PythonHandler, ShellHandler, resolve

DEFAULT_TIMEOUT = 10.0
ENTRY_POINT_GROUP = "pfar.hooks"


def load_handlers(
    config: Sequence[HookConfig], config_path: Path, hooks_dir: Path, cwd: Path
) -> list[Handler]:
    found: list[Handler] = []
    for n, entry in enumerate(config):
        point = HookPoint(entry.point)
        tools = frozenset(entry.tools)
        if entry.python is not None:
            try:
                function = resolve(entry.python)
            except ValueError as exc:
                raise ConfigError(str(config_path), f"hooks.{n}.python", str(exc)) from None
            found.append(PythonHandler(point, entry.python, function, entry.timeout_seconds, tools))
        else:
            assert entry.command is not None
            found.append(ShellHandler(point, entry.command, entry.timeout_seconds, tools, cwd))
    found += _directory(hooks_dir, cwd)
    found += _entry_points()
    return found


def _directory(hooks_dir: Path, cwd: Path) -> list[Handler]:
    if not hooks_dir.is_dir():
        return []
    found: list[Handler] = []
    for sub in sorted(hooks_dir.iterdir()):
        if not sub.is_dir():
            raise ConfigError(
                str(sub), "", "is not a directory: hooks/ holds one directory per hook point"
            )
        try:
            point = parse_point(sub.name)
        except ValueError as exc:
            raise ConfigError(str(sub), "", str(exc)) from None
        for file in sorted(sub.iterdir()):
            if file.name.startswith(".") or not file.is_file():
                continue
            check_private(file)  # a handler another user could edit is refused
            if not os.access(file, os.X_OK):
                raise ConfigError(str(file), "", "is not executable (chmod u+x it)")
            label = f"hooks/{sub.name}/{file.name}"
            found.append(
                ShellHandler(point, _quoted(file), DEFAULT_TIMEOUT, frozenset(), cwd, label)
            )
    return found


def _entry_points() -> list[Handler]:
    found: list[Handler] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP})"
        try:
            point = parse_point(ep.name.split(".", maxsplit=1)[0])
            function = resolve(ep.value)
        except ValueError as exc:
            raise ConfigError(where, "", str(exc)) from None
        found.append(PythonHandler(point, ep.value, function, DEFAULT_TIMEOUT))
    return found


def _quoted(path: Path) -> str:
    text = str(path)
    return "'" + text.replace("'", "'\\''") + "'"
