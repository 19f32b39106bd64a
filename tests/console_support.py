"""A kernel serving its console, for the console's tests: `pfar run` as a real process
on a home whose console listens on a free port, and an HTTP client logged in to it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from pfar.vault.home import Home

from .support import KernelProcess, make_home, pfar, wait_for

CONSOLE_CONFIG = "[console]\nport = 0\n"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def console_home(root: Path) -> Home:
    return make_home(root, config=CONSOLE_CONFIG, examples=True)


def console_url(home: Home) -> str:
    """The running kernel's console address, once it listens."""
    wait_for(home.console_address.exists, what="the console to listen")
    return home.console_address.read_text().strip()


def owner_token(home: Home) -> str:
    shown = pfar(home, "console", "token")
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.strip()


@contextmanager
def serving(home: Home) -> Iterator[KernelProcess]:
    kernel = KernelProcess(home)
    try:
        kernel.wait_ready()
        console_url(home)
        yield kernel
    finally:
        if kernel.proc.poll() is None:
            kernel.terminate()


def logged_in(home: Home) -> httpx.Client:
    client = httpx.Client(base_url=console_url(home), follow_redirects=False, timeout=20)
    answer = client.post("/login", data={"token": owner_token(home)})
    assert answer.status_code == 303, answer.text
    return client


def csrf_of(page: str) -> str:
    found = _CSRF.search(page)
    assert found is not None, "the page has no form"
    return found.group(1)
