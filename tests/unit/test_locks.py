"""Resource locks: taken in sorted order, many tasks over overlapping resources never
deadlock and never share what one changes; a lock not to be had in time is the call's
"Resource locked by another task", naming the holder."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pfar.errors import ResourceLocked
from pfar.kernel.locks import LockManager
from pfar.tools.base import Resource

NAMES = ["/w/a", "/w/b", "/w/c", "/w/d"]
_resource = st.builds(
    Resource, st.just("file"), st.sampled_from(NAMES), st.sampled_from(["shared", "exclusive"])
)


async def _hook(point: object, about: object) -> None:
    """A ResourceLock* hook that yields to the loop (as a real handler does)."""
    await asyncio.sleep(0)


@pytest.mark.parametrize("hooked", [False, True], ids=["no hooks", "lock hooks"])
@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.lists(_resource, min_size=1, max_size=4), min_size=2, max_size=16))
def test_overlapping_calls_never_deadlock_and_never_share_a_write(
    hooked: bool, calls: list[list[Resource]]
) -> None:
    async def scene() -> None:
        locks = LockManager(timeout=30, observe=_hook if hooked else None)
        inside: dict[str, dict[str, str]] = {n: {} for n in NAMES}

        async def call(n: int, wants: list[Resource]) -> None:
            # each call asks in its own (shuffled) order: the manager sorts
            async with locks.hold(f"task{n}:0", tuple(reversed(wants))):
                for r in wants:
                    others = {h: m for h, m in inside[r.name].items() if h != f"task{n}"}
                    assert (r.mode == "shared" and all(m == "shared" for m in others.values())) or (
                        not others
                    ), (r, others)
                    mode = (
                        "exclusive"
                        if any(w.name == r.name and w.mode == "exclusive" for w in wants)
                        else "shared"
                    )
                    inside[r.name][f"task{n}"] = mode
                await asyncio.sleep(0.001)
                for r in wants:
                    inside[r.name].pop(f"task{n}", None)

        async with asyncio.timeout(20):  # a deadlock would hang here
            await asyncio.gather(*(call(n, w) for n, w in enumerate(calls)))
        assert locks.waiting() == [] and not locks._locks

    asyncio.run(scene())


def test_a_lock_not_to_be_had_in_time_names_its_holder() -> None:
    async def scene() -> None:
        locks = LockManager(timeout=0.05)
        write = Resource("file", "/w/a", "exclusive")
        async with locks.hold("7f3c2a9e-holder:3", (write,)):

            async def wait() -> None:
                async with locks.hold("other:1", (Resource("file", "/w/a", "shared"),)):
                    pass

            waiter = asyncio.create_task(wait())
            await asyncio.sleep(0.01)
            (shown,) = locks.waiting()  # what `pfar queue` lists meanwhile
            assert shown.task_id == "other"
            assert shown.reason == "lock: file /w/a held by task 7f3c2a9e"
            with pytest.raises(ResourceLocked) as raised:
                await waiter
            assert locks.waiting() == []
            assert "Resource locked by another task" in str(raised.value)
            assert "file /w/a is held by task 7f3c2a9e" in str(raised.value)
            async with locks.hold("other:2", (Resource("file", "/w/b", "exclusive"),)):
                pass  # another file is free
        async with locks.hold("other:3", (write,)):
            pass  # released: free again
        assert not locks.holding()  # nothing left in the table: not even the given-up wait

    asyncio.run(scene())
