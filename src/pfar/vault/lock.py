"""The home lock, held by what writes the vault without a kernel: a command that
rewrites its files (encrypt, rekey) for its whole run, so that no kernel runs while it
works and none starts until it is done; and an offline write (`pfar secret set` with no
kernel), so that it never lands in a file being rewritten."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import VaultIOError, VaultLocked
from .home import Home, HomeLock


@contextmanager
def vault_command_lock(home: Home, command: str) -> Iterator[None]:
    with _locked(
        home,
        True,
        f"`{command}` rewrites the vault's files and runs only while no kernel does. Stop "
        "the kernel (Ctrl-C where it runs, or `kill -TERM {pid}`), then run it again; "
        "nothing was changed",
    ):
        yield


@contextmanager
def offline_write_lock(home: Home) -> Iterator[None]:
    with _locked(
        home,
        False,
        "it is a kernel starting, or `pfar vault encrypt` or `rekey` at work: run the "
        "command again when it is done; nothing was changed",
    ):
        yield


@contextmanager
def _locked(home: Home, required: bool, advice: str) -> Iterator[None]:
    lock = HomeLock(home)
    try:
        lock.acquire()
    except (OSError, VaultIOError) as exc:
        # the lock file cannot be written (a full disk, a read-only home): a command
        # that rewrites the vault does not run without the lock; an offline write goes
        # on, and its own write meets the same trouble and names it precisely
        if required:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise VaultIOError(
                f"cannot take the home's lock {home.lock_file} ({why}); "
                "nothing was changed. Fix that (free some space, make the home writable), "
                "then run the command again"
            ) from None
        yield
        return
    except VaultLocked:
        try:
            holder = home.lock_file.read_text().strip() or "unknown"
        except OSError:
            holder = "unknown"
        raise VaultLocked(
            f"{home.root} is in use by a running kernel or another pfar command (pid "
            f"{holder}): {advice.replace('{pid}', holder)}"
        ) from None
    try:
        yield
    finally:
        lock.release()
