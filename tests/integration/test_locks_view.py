"""`pfar locks` and the console's Kernel page: the resource locks held now, with the
task, the holder and the lease, read from the journal with or without a kernel."""

from __future__ import annotations

import json
from pathlib import Path

from ..console_support import CONSOLE_CONFIG, logged_in, serving
from ..crash.test_locks_crash import _holder
from ..support import make_home, pfar


def test_a_held_lock_is_listed_with_its_task_holder_and_lease(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", config=CONSOLE_CONFIG, examples=True)
    locked = tmp_path / "same.txt"
    with serving(home):
        assert "No lock is held" in logged_in(home).get("/kernel").text
        assert json.loads(pfar(home, "locks", "--json").stdout) == []
        holder = _holder(home, locked, 600)  # another process's lock, its lease long
        try:
            shown = pfar(home, "locks", "--json")
            assert shown.returncode == 0, shown.stderr
            (lock,) = json.loads(shown.stdout)
            assert (lock["kind"], lock["name"], lock["mode"], lock["task_id"]) == (
                "file",
                str(locked.resolve()),
                "exclusive",
                "other-task",
            )
            assert lock["pid"] == holder.pid and lock["lease_until"] > lock["acquired_at"]
            page = logged_in(home).get("/kernel").text
            assert str(locked.resolve()) in page and "exclusive" in page
            assert 'href="/tasks?kind=workflow"' in page
        except BaseException:
            holder.kill()
            raise
    try:
        # no kernel: the same view, read from the vault
        offline = pfar(home, "locks")
        assert offline.returncode == 0 and "exclusive" in offline.stdout, offline.stderr
    finally:
        holder.kill()
        holder.wait()
