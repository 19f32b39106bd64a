"""A passphrase for the vault's key, read from the terminal or from the file descriptor
named by `PFAR_PASSPHRASE_FD`; never from argv or the environment."""

from __future__ import annotations

import getpass
import os
import sys

from ...errors import VaultKeyMissing

PASSPHRASE_FD_ENV = "PFAR_PASSPHRASE_FD"


def read_passphrase(prompt: str = "vault passphrase: ", env: str = PASSPHRASE_FD_ENV) -> str:
    """From the file descriptor in `env` (PFAR_PASSPHRASE_FD; read once, then closed),
    else from the terminal. Never from argv or the environment."""
    raw_fd = os.environ.get(env)
    if raw_fd:
        try:
            fd = int(raw_fd)
            with os.fdopen(fd, "r", encoding="utf-8", closefd=True) as f:
                text = f.readline()
        except (ValueError, OSError) as exc:
            raise VaultKeyMissing(
                f"{env}={raw_fd!r} does not name a readable file descriptor "
                f"({exc}); nothing was opened"
            ) from None
        finally:
            # read once: a second read of a drained pipe would be an empty passphrase
            os.environ.pop(env, None)
        value = text.rstrip("\r\n")
        if not value:
            raise VaultKeyMissing(f"the passphrase read from {env} is empty")
        return value
    try:
        with open("/dev/tty", "r+b", buffering=0):
            pass
    except OSError:
        raise VaultKeyMissing(
            "the vault's key is a passphrase, and there is no terminal to ask for it: give "
            f"it through a file descriptor (`{env}=3 pfar run 3<passfile`)"
        ) from None
    value = getpass.getpass(prompt, stream=sys.stderr)
    if not value:
        raise VaultKeyMissing("an empty passphrase was given; nothing was opened")
    return value
