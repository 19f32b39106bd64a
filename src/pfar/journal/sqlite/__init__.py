"""The journal on SQLite: one file in the vault, written by one kernel (the default)."""
