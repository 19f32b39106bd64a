"""`$PFAR_HOME`: the layout of a kernel's home directory and the lock that says who owns it."""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import VaultLocked
from .writable import unwritable_file


@dataclass(frozen=True, slots=True)
class Home:
    """Paths inside one pfar home. Holds no open resources."""

    root: Path

    @classmethod
    def from_env(cls, override: str | os.PathLike[str] | None = None) -> Home:
        raw = override or os.environ.get("PFAR_HOME") or Path.home() / ".pfar"
        return cls(Path(raw).expanduser().absolute())

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def vault_dir(self) -> Path:
        return self.root / "vault"

    @property
    def sessions_db(self) -> Path:
        return self.vault_dir / "sessions.db"

    @property
    def secrets_db(self) -> Path:
        return self.vault_dir / "secrets.db"

    @property
    def memory_db(self) -> Path:
        return self.vault_dir / "memory.db"

    @property
    def templates_dir(self) -> Path:
        return self.root / "templates"

    @property
    def hooks_dir(self) -> Path:
        """Shell hook handlers: `hooks/<HookPoint>/<executable>` (docs/hooks.md)."""
        return self.root / "hooks"

    @property
    def skills_dir(self) -> Path:
        """The owner's skills: `skills/<name>/SKILL.md` (docs/skills.md)."""
        return self.root / "skills"

    @property
    def scripts_dir(self) -> Path:
        """The scripted model's response files (`llm.script` is relative to the home)."""
        return self.root / "scripts"

    @property
    def workspaces_dir(self) -> Path:
        return self.root / "workspaces"

    @property
    def control_socket(self) -> Path:
        return self.root / "control.sock"

    @property
    def control_token(self) -> Path:
        """This boot's token: every control request carries it (owner-only, never in a
        sandbox: the home is mounted away there)."""
        return self.root / "control.token"

    @property
    def console_address(self) -> Path:
        """Where the running kernel's web console listens (its URL, no secret in it)."""
        return self.root / "console.url"

    @property
    def lock_file(self) -> Path:
        return self.root / "kernel.lock"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    @property
    def owner_log(self) -> Path:
        """Every message delivered to the owner through the CLI sink, one JSON line each."""
        return self.root / "owner.log"

    def workspace(self, task_id: str) -> Path:
        return self.workspaces_dir / task_id


class HomeLock:
    """An exclusive, advisory lock on `kernel.lock`: one kernel owns a home.

    The kernel takes it before it touches the vault; the OS releases it when the
    process dies, however it dies, so a SIGKILLed kernel never leaves it stale.
    """

    def __init__(self, home: Home) -> None:
        self._home = home
        self._fd: int | None = None

    def acquire(self) -> None:
        lock = self._home.lock_file
        try:
            self._home.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a read-only or full file system: said as such
            raise unwritable_file(lock, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise VaultLocked(
                f"{self._home.root} is owned by a running kernel (pid {holder}); "
                "one kernel owns a home: stop it first or use another PFAR_HOME"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError as exc:
            os.close(fd)
            raise unwritable_file(lock, exc) from None
        self._fd = fd

    def is_held_elsewhere(self) -> bool:
        """True when a live kernel holds the lock (checked without taking it for long)."""
        if not self._home.lock_file.exists():
            return False
        try:
            fd = os.open(self._home.lock_file, os.O_RDWR)
        except OSError as exc:
            if exc.errno != errno.EROFS:
                raise
            # a home on a read-only file system: local flock needs no more (no kernel can
            # run there, but one that was running when it turned read-only still holds it)
            fd = os.open(self._home.lock_file, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
