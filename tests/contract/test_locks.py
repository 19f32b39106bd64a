"""The lock family's contract: resource locks taken all or none, each with its holder
process and a lease, and the calls waiting for one."""

from __future__ import annotations

from pfar.journal import (
    TaskState,
)
from pfar.journal.locks_sql import LockClaim
from pfar.journal.store import Store

from .helpers import lock_owner, release, run
from .verbs import covers

S = TaskState


# -- resource locks (locks_sql.py) ----------------------------------------------


@covers("locks.acquire", "locks.release", "locks.held")
def test_locks_are_taken_all_or_none(store: Store) -> None:
    me, other = lock_owner(), lock_owner("boot-2", 202)
    alive = lambda pid, started: True  # noqa: E731
    a = LockClaim("file", "/w/a", "exclusive")
    b = LockClaim("file", "/w/b", "shared")
    assert run(store.locks.acquire([b], "t2:0", "t2", other, 60, alive)) == (None, 0)
    # a shared lock held elsewhere does not stop a shared claim, only an exclusive one
    assert run(store.locks.acquire([b], "t1:0", "t1", me, 60, alive)) == (None, 0)
    release(store, "t1:0")
    found, _ = run(
        store.locks.acquire(
            [a, LockClaim("file", "/w/b", "exclusive")], "t1:1", "t1", me, 60, alive
        )
    )
    assert found is not None and found.holder == "t2:0" and found.pid == 202
    # none of the claims was taken: /w/a is still free for another holder
    assert [h.name for h in run(store.locks.held())] == ["/w/b"]
    release(store, "t2:0")
    assert run(store.locks.held()) == []


@covers("locks.acquire")
def test_a_lock_whose_holder_is_gone_or_whose_lease_expired_is_taken(store: Store) -> None:
    me = lock_owner()
    claim = [LockClaim("repo", "/w", "exclusive")]
    run(store.locks.acquire(claim, "t2:0", "t2", lock_owner("boot-2", 202), 60, lambda p, s: True))
    # the holder's process is gone (same host): stale, taken over
    assert run(store.locks.acquire(claim, "t1:0", "t1", me, 60, lambda p, s: p != 202)) == (
        None,
        1,
    )
    # a holder on another host cannot be looked at: its lease decides
    far = lock_owner("boot-3", 303, host="elsewhere")
    release(store, "t1:0")
    run(store.locks.acquire(claim, "t3:0", "t3", far, 0, lambda p, s: False))
    # (its lease of 0 s ended as it was taken)
    assert run(store.locks.acquire(claim, "t1:1", "t1", me, 60, lambda p, s: False)) == (
        None,
        1,
    )
    # a live holder elsewhere with a lease that runs is waited on
    release(store, "t1:1")
    run(
        store.locks.acquire(
            claim, "t4:0", "t4", lock_owner("boot-4", 404, "far"), 3600, lambda p, s: False
        )
    )
    found, _ = run(store.locks.acquire(claim, "t5:0", "t5", me, 60, lambda p, s: False))
    assert found is not None and found.holder == "t4:0" and found.host == "far"


@covers("locks.clear_stale", "locks.waiting", "locks.waits", "locks.renew")
def test_stale_locks_and_old_waits_are_cleared_at_a_start(store: Store) -> None:
    claim = [LockClaim("host", "example.com", "exclusive")]
    old = lock_owner("boot-0", 99)
    run(store.locks.acquire(claim, "t9:0", "t9", old, 3600, lambda p, s: True))
    store.locks.waiting("t8:0", "t8", "boot-0", "lock: host example.com held by task t9")
    run(store.locks.renew("boot-0", 3600))  # a commit: the deferred wait rides on it
    assert run(store.locks.waits()) == {"t8": "lock: host example.com held by task t9"}
    assert run(store.locks.clear_stale(lock_owner(), lambda p, s: p != 99)) == 1
    assert run(store.locks.held()) == [] and run(store.locks.waits()) == {}


@covers("locks.waiting", "locks.waited", "locks.waits")
def test_a_wait_is_shown_until_the_call_stops_waiting(store: Store) -> None:
    assert run(store.locks.waits()) == {}
    store.locks.waiting("t1:0", "t1", "boot-1", "lock: file /w/a held by task t2")
    store.locks.waiting("t3:2", "t3", "boot-1", "lock: repo /w held by task t2")
    run(store.locks.renew("boot-1", 60))  # a commit: the waits ride on it
    assert run(store.locks.waits()) == {
        "t1": "lock: file /w/a held by task t2",
        "t3": "lock: repo /w held by task t2",
    }
    store.locks.waited("t1:0")
    run(store.locks.renew("boot-1", 60))
    assert run(store.locks.waits()) == {"t3": "lock: repo /w held by task t2"}


@covers("locks.renew", "locks.held")
def test_renew_extends_the_leases_of_one_boots_locks(store: Store) -> None:
    alive = lambda pid, started: True  # noqa: E731
    claim = [LockClaim("file", "/w/a", "exclusive")]
    run(store.locks.acquire(claim, "t1:0", "t1", lock_owner("boot-1"), 1, alive))
    other = [LockClaim("file", "/w/b", "exclusive")]
    run(store.locks.acquire(other, "t2:0", "t2", lock_owner("boot-2", 202), 1, alive))
    before = {h.holder: h.lease_until for h in run(store.locks.held())}
    assert run(store.locks.renew("boot-1", 3600)) == 1
    after = {h.holder: h.lease_until for h in run(store.locks.held())}
    assert after["t1:0"] > before["t1:0"] and after["t2:0"] == before["t2:0"]
    assert run(store.locks.renew("boot-9", 3600)) == 0
