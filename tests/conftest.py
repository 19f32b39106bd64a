from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from .support import RecordingServer

# Every test home is encrypted (as `pfar init` makes one), with its key in a key file:
# the fallback where no OS keychain exists. Tests never reach the keychain of the person
# running them (the fail backend), and their key files go to a directory of their own;
# the keychain path is tested with a backend a test names itself.
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
os.environ["PFAR_KEY_DIR"] = tempfile.mkdtemp(prefix="pfar-test-keys-")
# removed when the run ends: a run's keys open only that run's homes, gone with it
atexit.register(shutil.rmtree, os.environ["PFAR_KEY_DIR"], ignore_errors=True)


@pytest.fixture
def http_server() -> Iterator[RecordingServer]:
    server = RecordingServer()
    yield server
    server.close()
