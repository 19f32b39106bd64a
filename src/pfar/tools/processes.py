"""Naming a process so that a later kernel can find it again: pid plus start time.

A pid alone is reused by the OS; the pair (pid, start time in clock ticks since
boot, from /proc/<pid>/stat) names one process for the life of the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..journal.rows import StepProcess


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 of the whole line


def identity(pid: int) -> StepProcess | None:
    started = start_time(pid)
    return None if started is None else StepProcess(pid=pid, start_time=started)


def kill_group(pgid: int) -> None:
    """SIGKILL a process group this process started and still owns (gone: nothing to do)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def end_group_if_same(process: Mapping[str, object]) -> bool:
    """SIGKILL the process group led by `process` if that very process still runs.

    A record without a start time (the process ended before it could be read) names
    no process, and nothing is signalled for it.
    """
    pid, started = process.get("pid") or 0, process.get("start_time")
    if not isinstance(pid, int) or pid <= 0 or started is None or start_time(pid) != started:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
        return True
    return False


def labelled(name: str, prefix: str = "") -> Iterator[tuple[int, str]]:
    """(pid, value) of every running process of this user whose environment holds
    `name=prefix...`, with the value after the prefix. `/proc/<pid>/environ` shows a
    process's environment for its life; a kernel run as root leaves other users'
    processes alone, whatever they carry."""
    marker = f"{name}={prefix}".encode()
    uid = os.getuid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        for var in environ.split(b"\0"):
            if var.startswith(marker):
                yield int(entry.name), var[len(marker) :].decode(errors="replace")
                break
