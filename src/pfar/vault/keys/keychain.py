"""The vault's key in the OS keychain, through `keyring` (Secret Service, macOS Keychain,
Windows Credential Locker): service "pfar", account the vault's id. `keyring` is
imported only when a keychain is used."""

from __future__ import annotations

import contextlib

from ...errors import VaultError, VaultKeyMissing
from .sources import Keychain
from .vault_key import VaultKey


def keychain_backend() -> str | None:
    """The name of a usable keychain backend, or None where there is none (a headless
    server, CI). `keyring` picks it (PYTHON_KEYRING_BACKEND or its config chooses one)."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:
        return None
    if isinstance(backend, fail.Keyring) or type(backend).__module__.endswith(".null"):
        return None
    # a backend below priority 1 is one keyring itself does not recommend (keyrings.alt's
    # files in the home): taken only when the owner chose it (PYTHON_KEYRING_BACKEND or
    # keyringrc.cfg), never found by chance
    if float(getattr(backend, "priority", 0) or 0) < 1 and not _chosen_by_owner():
        return None
    backends = getattr(backend, "backends", None)
    if backends is not None and not backends:  # a chainer with nothing under it
        return None
    return f"{type(backend).__module__}.{type(backend).__qualname__}"


def _chosen_by_owner() -> bool:
    import keyring.core

    try:
        return (keyring.core.load_env() or keyring.core.load_config()) is not None
    except Exception:
        return False


def keychain_get(source: Keychain) -> str | None:
    """What the keychain holds for `source` (a key in hex), or None."""
    import keyring
    import keyring.errors

    try:
        return keyring.get_password(source.service, source.account)
    except keyring.errors.KeyringLocked:
        raise VaultKeyMissing(
            f"the vault's key is in {source.describe()}, which is locked: unlock your "
            "keychain (log in to the desktop session, or `gnome-keyring-daemon --unlock`), "
            "then start pfar again"
        ) from None
    except keyring.errors.KeyringError as exc:
        raise VaultKeyMissing(
            f"the vault's key is in {source.describe()}, which cannot be read "
            f"({type(exc).__name__}); check the keychain, then start pfar again"
        ) from None


def keychain_set(source: Keychain, key: VaultKey) -> None:
    import keyring
    import keyring.errors

    try:
        keyring.set_password(source.service, source.account, key.hex())
    except keyring.errors.KeyringError as exc:
        raise VaultError(
            f"cannot store the vault's key in {source.describe()} ({type(exc).__name__}); "
            "nothing was created. Choose another place with `--key-file` or `--passphrase`"
        ) from None


def keychain_delete(source: Keychain) -> None:
    import keyring
    import keyring.errors

    with contextlib.suppress(keyring.errors.KeyringError):
        keyring.delete_password(source.service, source.account)
