"""The vault's key: where it is kept, how it is checked, and how a vault is unlocked.

An encrypted vault has one 256-bit key, random, used raw by SQLCipher (no key derivation
on every open). `vault/unlock.json` says where the key is kept and carries a check value
(an HMAC of the vault's id under the key), never the key: a wrong key, a missing key and
a damaged file are told apart before any database is opened.

Where the key is kept (`KeySource`, one of):
- `Keychain`: the OS keychain through `keyring` (Secret Service, macOS Keychain, Windows
  Credential Locker), service "pfar", account the vault's id;
- `KeyFile`: a file readable by the owner only, outside the home (a headless server);
- `Passphrase`: nothing is kept: the key is stretched from a passphrase with scrypt
  (memory-hard) each time pfar starts, read from the terminal or from the file descriptor
  named by `PFAR_PASSPHRASE_FD`.

The key never reaches argv, a log, an error message or a child's environment.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import hmac
import json
import os
import secrets
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import VaultCorrupt, VaultError, VaultKeyMissing, VaultKeyWrong
from .durable import fsync_dir
from .home import Home

UNLOCK_NAME = "unlock.json"
KEYCHAIN_SERVICE = "pfar"
PASSPHRASE_FD_ENV = "PFAR_PASSPHRASE_FD"
KEY_DIR_ENV = "PFAR_KEY_DIR"
_PLAIN_HEADER = b"SQLite format 3\x00"
_CHECK_LABEL = b"pfar vault key check v1\x00"

# scrypt's cost: 128 MiB and about half a second here, OWASP's figure for scrypt
_SCRYPT_N = 2**17
_SCRYPT_R = 8
_SCRYPT_P = 1


class VaultKey:
    """32 random bytes. Shown as `VaultKey(…)`: printing one never prints the key."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        if len(raw) != 32:
            raise ValueError("a vault key is 32 bytes")
        self._raw = raw

    @classmethod
    def generate(cls) -> VaultKey:
        return cls(secrets.token_bytes(32))

    @classmethod
    def from_hex(cls, text: str, where: str) -> VaultKey:
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise VaultKeyWrong(
                f"{where} does not hold a vault key (64 hexadecimal digits); nothing was opened"
            )
        return cls(raw)

    def pragma(self) -> str:
        """The value of SQLCipher's `PRAGMA key`: a raw key, used as it is (no KDF)."""
        return f"\"x'{self._raw.hex()}'\""

    def hex(self) -> str:
        """For the key's own storage (keychain entry, key file, export): nowhere else."""
        return self._raw.hex()

    def check(self, vault_id: str) -> str:
        return hmac.new(self._raw, _CHECK_LABEL + vault_id.encode(), hashlib.sha256).hexdigest()[
            :32
        ]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VaultKey) and hmac.compare_digest(self._raw, other._raw)

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return "VaultKey(…)"

    __str__ = __repr__


# -- where the key is kept ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Keychain:
    account: str
    service: str = KEYCHAIN_SERVICE
    kind: Literal["keychain"] = "keychain"

    def describe(self) -> str:
        return f"the OS keychain (service {self.service!r}, account {self.account!r})"


@dataclass(frozen=True, slots=True)
class KeyFile:
    path: Path
    kind: Literal["file"] = "file"

    def describe(self) -> str:
        return f"the key file {self.path}"


@dataclass(frozen=True, slots=True)
class Passphrase:
    salt: str  # hex
    n: int = _SCRYPT_N
    r: int = _SCRYPT_R
    p: int = _SCRYPT_P
    kind: Literal["passphrase"] = "passphrase"

    def describe(self) -> str:
        return f"a passphrase (scrypt, N={self.n}, r={self.r}, p={self.p})"

    def derive(self, passphrase: str) -> VaultKey:
        raw = hashlib.scrypt(
            passphrase.encode(),
            salt=bytes.fromhex(self.salt),
            n=self.n,
            r=self.r,
            p=self.p,
            maxmem=256 * 1024 * 1024,
            dklen=32,
        )
        return VaultKey(raw)


KeySource = Keychain | KeyFile | Passphrase
SourceName = Literal["keychain", "file", "passphrase"]


@dataclass(frozen=True, slots=True)
class KeySlot:
    """A key other than the current one, named in unlock.json while a key change
    (`pfar vault rekey`) is under way: where it is kept and its check value."""

    source: KeySource
    check: str


@dataclass(frozen=True, slots=True)
class UnlockInfo:
    """`vault/unlock.json`: how to unlock this vault. Holds no secret.

    `next` is set while a rekey moves the files to a new key (some files may be under
    either key); `old` once every file is under the new key, until the old key is
    removed from where it was kept."""

    vault_id: str
    source: KeySource
    check: str
    created_at: str
    next: KeySlot | None = None
    old: KeySlot | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": 1,
            "vault_id": self.vault_id,
            "cipher": "sqlcipher4",
            "key": _source_json(self.source),
            "check": self.check,
            "created_at": self.created_at,
        }
        for name, slot in (("next", self.next), ("old", self.old)):
            if slot is not None:
                data[name] = {"key": _source_json(slot.source), "check": slot.check}
        return data

    @classmethod
    def parse(cls, data: Any, where: Path) -> UnlockInfo:
        try:
            slots = {
                name: KeySlot(_parse_source(data[name]["key"]), str(data[name]["check"]))
                for name in ("next", "old")
                if data.get(name) is not None
            }
            return cls(
                vault_id=str(data["vault_id"]),
                source=_parse_source(data["key"]),
                check=str(data["check"]),
                created_at=str(data.get("created_at", "")),
                **slots,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise VaultCorrupt(
                f"{where} is not readable ({exc!s}); it says how to unlock the encrypted vault. "
                "Restore it from a backup (the databases were not touched)"
            ) from None


def _source_json(source: KeySource) -> dict[str, Any]:
    match source:
        case Keychain(account=account, service=service):
            return {"kind": "keychain", "service": service, "account": account}
        case KeyFile(path=path):
            return {"kind": "file", "path": str(path)}
        case Passphrase(salt=salt, n=n, r=r, p=p):
            return {"kind": "passphrase", "kdf": "scrypt", "salt": salt, "n": n, "r": r, "p": p}


def _parse_source(src: Any) -> KeySource:
    kind = src["kind"]
    if kind == "keychain":
        return Keychain(account=str(src["account"]), service=str(src["service"]))
    if kind == "file":
        return KeyFile(Path(str(src["path"])))
    if kind == "passphrase":
        return Passphrase(salt=str(src["salt"]), n=int(src["n"]), r=int(src["r"]), p=int(src["p"]))
    raise ValueError(f"key.kind {kind!r} is not keychain, file or passphrase")


def unlock_path(vault_dir: Path) -> Path:
    return vault_dir / UNLOCK_NAME


def read_unlock(vault_dir: Path) -> UnlockInfo | None:
    """This vault's unlock.json, or None for a plain vault."""
    path = unlock_path(vault_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise VaultError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise VaultCorrupt(
            f"{path} is not JSON ({exc}); it says how to unlock the encrypted vault. "
            "Restore it from a backup (the databases were not touched)"
        ) from None
    return UnlockInfo.parse(data, path)


def write_unlock(vault_dir: Path, info: UnlockInfo) -> None:
    """Replace unlock.json atomically (written, synced, renamed, directory synced)."""
    path = unlock_path(vault_dir)
    tmp = path.with_name(f".{UNLOCK_NAME}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (json.dumps(info.to_json(), indent=2) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(vault_dir)


def is_plain_sqlite(path: Path) -> bool | None:
    """True for a plain SQLite file, False for anything else (encrypted), None if empty
    or absent."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return None
    if not head:
        return None
    return head == _PLAIN_HEADER


# -- the OS keychain -----------------------------------------------------------------


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


def _keychain_get(source: Keychain) -> str | None:
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


def keychain_get(source: Keychain) -> str | None:
    """What the keychain holds for `source` (a key in hex), or None."""
    return _keychain_get(source)


def _keychain_set(source: Keychain, key: VaultKey) -> None:
    import keyring
    import keyring.errors

    try:
        keyring.set_password(source.service, source.account, key.hex())
    except keyring.errors.KeyringError as exc:
        raise VaultError(
            f"cannot store the vault's key in {source.describe()} ({type(exc).__name__}); "
            "nothing was created. Choose another place with `--key-file` or `--passphrase`"
        ) from None


def discard(source: KeySource) -> None:
    """Remove a key pfar itself just made, for a vault that was never made (a failed init)."""
    match source:
        case Keychain():
            keychain_delete(source)
        case KeyFile(path=path):
            path.unlink(missing_ok=True)
        case Passphrase():
            pass


def keychain_delete(source: Keychain) -> None:
    import keyring
    import keyring.errors

    with contextlib.suppress(keyring.errors.KeyringError):
        keyring.delete_password(source.service, source.account)


# -- key files ---------------------------------------------------------------------


def default_key_dir() -> Path:
    """Where key files go unless the owner names one: `$PFAR_KEY_DIR`, else
    `$XDG_CONFIG_HOME/pfar/keys` (`~/.config/pfar/keys`). Never inside a home."""
    override = os.environ.get(KEY_DIR_ENV)
    if override:
        return Path(override).expanduser().absolute()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser().absolute() / "pfar" / "keys"


def default_key_file(vault_id: str) -> Path:
    return default_key_dir() / f"{vault_id}.key"


def write_key_file(path: Path, key: VaultKey, home: Home) -> None:
    """Create the key file (0600, in a 0700 directory); refuse one inside the home or
    one that exists (a key is never overwritten: it may be the only copy)."""
    path = path.expanduser().absolute()
    if path.is_relative_to(home.root.absolute()):
        raise VaultError(
            f"the key file {path} would be inside the home {home.root}: a key kept next to "
            "what it locks protects nothing. Choose a path outside it"
        )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise VaultError(
            f"the key file {path} exists; pfar never overwrites a key. Move it away or "
            "choose another path"
        ) from None
    try:
        os.write(fd, (key.hex() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def _read_key_file(source: KeyFile) -> VaultKey:
    path = source.path
    try:
        st = path.stat()
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise VaultKeyMissing(
            f"the vault's key file {path} does not exist. Put the key file back (from "
            "where you kept a copy), or restore the vault from a backup with its key"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise VaultKeyMissing(f"the vault's key file {path} cannot be read ({exc})") from None
    if st.st_mode & 0o077:
        raise VaultKeyMissing(
            f"the vault's key file {path} is readable by others (mode "
            f"{st.st_mode & 0o777:o}); refused. Fix it with `chmod 600 {path}`"
        )
    return VaultKey.from_hex(text, f"the key file {path}")


# -- passphrases -----------------------------------------------------------------------


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


# -- creating and finding keys --------------------------------------------------------


EncryptChoice = Literal["auto", "keychain", "file", "passphrase", "none"]


@dataclass(frozen=True, slots=True)
class NewKey:
    key: VaultKey
    info: UnlockInfo
    fallback_reason: str | None  # why a key file was chosen under "auto"


def create_key(
    home: Home,
    choice: EncryptChoice,
    *,
    key_file: Path | None = None,
    passphrase: str | None = None,
    vault_id: str | None = None,
    name: str | None = None,
) -> NewKey:
    """Make a key and keep it where `choice` says; return it with its unlock.json.

    "auto" is the keychain where a backend exists, else a key file in the default key
    directory (and the reason is returned, to be printed). `name` is the keychain
    account and the default key file's stem (the vault's id unless a rekey names the
    next key otherwise); an existing key is never overwritten."""
    vault_id = vault_id or uuid.uuid4().hex
    name = name or vault_id
    fallback: str | None = None
    if choice == "auto":
        if key_file is not None:
            choice = "file"
        elif keychain_backend() is not None:
            choice = "keychain"
        else:
            choice = "file"
            fallback = "no OS keychain is available here (no keyring backend)"
    source: KeySource
    if choice == "keychain":
        if keychain_backend() is None:
            raise VaultError(
                "no OS keychain is available here (no keyring backend): choose "
                "`--key-file PATH` or `--passphrase` instead; nothing was created"
            )
        key = VaultKey.generate()
        source = Keychain(account=name)
        if _keychain_get(source) is not None:
            raise VaultError(
                f"{source.describe()} already holds a key; pfar never overwrites a key. "
                "Nothing was changed"
            )
        _keychain_set(source, key)
    elif choice == "file":
        key = VaultKey.generate()
        path = (key_file or default_key_file(name)).expanduser().absolute()
        write_key_file(path, key, home)
        source = KeyFile(path)
    elif choice == "passphrase":
        if not passphrase:
            raise VaultError("an empty passphrase cannot lock a vault; nothing was created")
        source = Passphrase(salt=secrets.token_hex(16))
        key = source.derive(passphrase)
    else:
        raise ValueError(choice)
    info = UnlockInfo(
        vault_id=vault_id,
        source=source,
        check=key.check(vault_id),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return NewKey(key, info, fallback)


def load_key(info: UnlockInfo, *, passphrase: str | None = None) -> VaultKey:
    """The key `info` names, checked against its check value."""
    match info.source:
        case Keychain() as source:
            text = _keychain_get(source)
            if text is None:
                raise VaultKeyMissing(
                    f"the vault's key is not in {source.describe()}. If this vault was "
                    "restored or moved from another machine, import its key with "
                    "`pfar vault key import FILE`; otherwise restore the keychain entry"
                )
            key = VaultKey.from_hex(text, source.describe())
        case KeyFile() as source:
            key = _read_key_file(source)
        case Passphrase() as source:
            key = source.derive(passphrase if passphrase is not None else read_passphrase())
    if not hmac.compare_digest(key.check(info.vault_id), info.check):
        where = info.source.describe()
        raise VaultKeyWrong(
            f"the key from {where} is not this vault's key (vault {info.vault_id}; its check "
            "value differs). The vault files were not touched and are not damaged for it: "
            + (
                "type the passphrase again"
                if isinstance(info.source, Passphrase)
                else "put this vault's key there (from where you kept a copy)"
            )
        )
    return key


_cache: dict[tuple[str, str], VaultKey] = {}


def unlock(home: Home) -> VaultKey | None:
    """This home's vault key (None for a plain vault), found once per process."""
    info = read_unlock(home.vault_dir)
    if info is None:
        return None
    if info.next is not None:
        raise VaultError(
            f"a change of the vault's key (`pfar vault rekey`) was interrupted: some files "
            f"of {home.vault_dir} are under the old key, some under the new one. Finish it "
            "with `pfar vault rekey` (it needs both keys); nothing was opened"
        )
    cached = _cache.get((str(home.vault_dir), info.check))
    if cached is not None:
        return cached
    key = load_key(info)
    _cache[(str(home.vault_dir), info.check)] = key
    return key


def forget(home: Home) -> None:
    """Drop the cached key of `home` (after a rekey or a restore)."""
    for entry in [e for e in _cache if e[0] == str(home.vault_dir)]:
        del _cache[entry]
