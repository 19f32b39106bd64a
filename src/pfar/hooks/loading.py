"""The handlers a kernel fires: `[[hooks]]` in config.toml, then the home's hooks
directory (`hooks/<HookPoint>/<executable>`, in name order), then the `pfar.hooks`
entry points of installed packages (named `<HookPoint>` or `<HookPoint>.<anything>`).

Loaded once at start, so a bad handler stops the start naming it: a module that
cannot be imported, a directory named after no hook point, a handler file that
another user could change. A hook runs as the owner, so the files it is made of pass
the owner and mode check that templates and scripts pass (vault/perms.py): every file
a `command` names (its program and any argument that is a file) and a `python`
handler's module with the packages above it, checked before anything is imported.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path

from ..config import HookConfig
from ..errors import ConfigError, UnsafePermissions
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
                _check_module(entry.python.partition(":")[0])
                function = resolve(entry.python)
            except UnsafePermissions as exc:
                raise _refused(config_path, f"hooks.{n}.python", exc) from None
            except ValueError as exc:
                raise ConfigError(str(config_path), f"hooks.{n}.python", str(exc)) from None
            found.append(PythonHandler(point, entry.python, function, entry.timeout_seconds, tools))
        else:
            assert entry.command is not None
            for file in _command_files(entry.command, cwd):
                try:
                    check_private(file)  # a program another user could edit runs as the owner
                except UnsafePermissions as exc:
                    raise _refused(config_path, f"hooks.{n}.command", exc) from None
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
            _check_module(ep.value.partition(":")[0])
            function = resolve(ep.value)
        except ValueError as exc:
            raise ConfigError(where, "", str(exc)) from None
        found.append(PythonHandler(point, ep.value, function, DEFAULT_TIMEOUT))
    return found


def _command_files(command: str, cwd: Path) -> list[Path]:
    """The files a hook command names: its program (found on PATH when it is a bare name)
    and every word that is an existing file, relative to the directory it runs in.

    Words are split as the shell would quote them; a command the split cannot read
    (an unclosed quote) is checked word by word on whitespace.
    """
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    files: list[Path] = []
    for n, word in enumerate(words):
        if n == 0 and "/" not in word:
            found = shutil.which(word)
            candidate = Path(found) if found else None
        else:
            candidate = cwd / Path(word).expanduser()
        if candidate is not None and candidate.is_file():
            files.append(candidate)
    return files


def _check_module(module_name: str) -> None:
    """The owner and mode check for `module_name` and each package above it, each
    checked before it is imported (finding `a.b` imports `a`, already checked).
    UnsafePermissions names the file; a module that cannot be found is left for
    `resolve` to report."""
    parts = module_name.split(".")
    for n in range(1, len(parts) + 1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:n]))
        except (ImportError, ValueError):
            return
        if spec is None:
            return
        if spec.origin and spec.has_location:
            check_private(Path(spec.origin))


def _refused(config_path: Path, key: str, exc: UnsafePermissions) -> ConfigError:
    """The hook's entry in config.toml, then the file refused and the fix."""
    return ConfigError(str(config_path), key, f"{exc.path}: {exc.problem}")


def _quoted(path: Path) -> str:
    text = str(path)
    return "'" + text.replace("'", "'\\''") + "'"
