"""The vault: where every durable byte of pfar lives (SQLite files under `$PFAR_HOME/vault`)."""

from .home import Home
from .sqlite import connect, open_vault_db

__all__ = ["Home", "connect", "open_vault_db"]
