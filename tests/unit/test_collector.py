"""The collector is set while kernels run and given back, as found, when the last stops."""

from __future__ import annotations

import gc

from pfar.kernel import collector


def test_the_last_kernel_to_stop_gives_the_collector_back_as_found() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    collector.hold()  # a first kernel
    collector.hold()  # a second, in the same process
    assert gc.get_threshold()[0] == collector.YOUNGEST_EVERY
    collector.give_back()  # one stops: the other still runs
    assert gc.get_threshold()[0] == collector.YOUNGEST_EVERY
    collector.give_back()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen
    collector.give_back()  # one too many (an abort before any start) changes nothing
    assert gc.get_threshold() == before
