"""The owner's usual credential files and folders: every file tool refuses them
(protected.py) and no sandbox shows them (sandbox.py)."""

from __future__ import annotations

from typing import Final

# the usual credential files and folders, relative to the user's home
CREDENTIAL_PATHS: Final = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker/config.json",
    ".config/gh",
    ".config/hub",
    ".config/gcloud",
    ".config/git/credentials",
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".password-store",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
)
