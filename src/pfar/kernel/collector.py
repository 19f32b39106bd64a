"""Python's garbage collector, set for a running kernel and given back when the last
kernel of the process stops.

What a kernel loads to start (modules, config, templates, tools, its model) lives as
long as it does: frozen out of the collector's sight, a full collection no longer walks
it (each walked ~80,000 objects, about 20 ms, several times per thousand tasks). Only
garbage cycles made before that moment are kept. And the youngest generation is
collected every 50,000 allocations, not every 700: a step's objects die young, and
collecting them that often cost 12 % of a recovery's time. A cycle of garbage lives a
little longer for it.

The collector is the process's, not a kernel's: the first kernel to start sets it, the
last to stop gives back what it found (a host's own thresholds and frozen objects).
"""

from __future__ import annotations

import gc

YOUNGEST_EVERY = 50_000


class _Setting:
    """How many running kernels hold the collector, and what the first one found."""

    def __init__(self) -> None:
        self.holders = 0
        self.found: tuple[int, int, int] | None = None
        self.froze = False  # a host that froze objects itself keeps them as it set them

    def hold(self) -> None:
        """A kernel starts running: the first one sets the collector."""
        if self.holders == 0:
            self.found = gc.get_threshold()
            self.froze = gc.get_freeze_count() == 0
            if self.froze:
                gc.freeze()
            gc.set_threshold(YOUNGEST_EVERY, 10, 10)
        self.holders += 1

    def give_back(self) -> None:
        """A kernel that held the collector stopped: the last one gives it back as found."""
        if self.holders == 0:
            return
        self.holders -= 1
        if self.holders == 0:
            if self.froze:
                gc.unfreeze()
                self.froze = False
            if self.found is not None:
                gc.set_threshold(*self.found)
                self.found = None


_SETTING = _Setting()
hold = _SETTING.hold
give_back = _SETTING.give_back
