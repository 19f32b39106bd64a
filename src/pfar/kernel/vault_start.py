"""The vault at a kernel's start, before recovery and before anything is written to it.

1. Integrity: each database is checked (vault/integrity.py); damage stops the start.
2. Back in time: the journal's position is compared with `vault/acknowledged`, the
   record of what the last kernel acknowledged (vault/acknowledged.py). A journal
   behind it lost acknowledged work: the start is refused, naming what is missing
   and how to restore it, until the owner restores a backup or accepts the loss
   (`pfar vault accept-loss`, journaled as a `VaultLossAccepted` event on the bus).
3. What the recovery report says about the vault: a loss accepted since the last
   start, and a restore (`vault/restored.json`, left by `pfar vault restore`).

A missing record is no loss (a new home, or one an older pfar ran): the start makes one.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import VaultWentBack
from ..journal.bus_sql import BusEventKind
from ..journal.records import now_rfc3339
from ..journal.sqlite import marks
from ..vault import acknowledged, integrity, restored
from ..vault.acknowledged import Acknowledged, Unreadable
from ..vault.home import Home
from ..vault.keys import VaultKey
from ..vault.restored import Restored
from .lost_work import JournalMark, missing_tasks

log = logging.getLogger("pfar.kernel")

ACCEPTED = BusEventKind.VaultLossAccepted  # the bus event `pfar vault accept-loss` journals
NAMED_IN_ERROR = 10  # lost task ids a refusal names in full
NAMED_IN_REPORT = 5  # and the owner's report, by their first 8 characters


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A journal behind the record of what was acknowledged (or a record that cannot
    be read, so nothing can be told)."""

    journal: JournalMark
    record: Acknowledged | Unreadable
    missing: list[str]  # task ids named elsewhere that the journal lacks

    @property
    def lost(self) -> tuple[int, int] | None:
        if isinstance(self.record, Unreadable):
            return None
        return self.journal.position + 1, self.record.position

    @property
    def after_power_cut(self) -> bool:
        """Lost as `synchronous = "NORMAL"` allows: its commits were not fsynced before
        the record, and the machine restarted since (a power cut, not a deleted log)."""
        record = self.record
        if isinstance(record, Unreadable) or record.synchronous != "NORMAL":
            return False
        now = acknowledged.machine_boot()
        return bool(now) and bool(record.machine_boot) and now != record.machine_boot

    def refusal(self, home: Home) -> VaultWentBack:
        path = acknowledged.path_of(home.vault_dir)
        if isinstance(self.record, Unreadable):
            return VaultWentBack(
                f"{path} cannot be read ({self.record.reason}), so pfar cannot tell whether "
                f"the journal {home.sessions_db} (at event {self.journal.position}) lost "
                "acknowledged work; pfar changed nothing and did not start. If the journal "
                "is as it should be, `pfar vault accept-loss` makes a fresh record; if it "
                "is not, restore the vault from a backup (`pfar vault restore BACKUP`)."
            )
        first, last = self.lost or (0, 0)
        return VaultWentBack(
            f"{home.sessions_db} went back in time: the journal ends at event "
            f"{self.journal.position}, but the kernel had acknowledged work up to event "
            f"{last} ({path}, written {self.record.at or 'at an unknown time'}). Missing: "
            f"events {_range(first, last)}; {_tasks(self.missing, NAMED_IN_ERROR, full=True)}. "
            "pfar changed nothing and did not start. This happens when sessions.db-wal was "
            "deleted or lost, or an older copy of the vault was put in place. To get the "
            "work back, put that sessions.db-wal back if you still have it, or restore a "
            "backup that holds it (`pfar vault restore BACKUP`); to run on without it, "
            "`pfar vault accept-loss` (it journals what was lost, and the next start's "
            "report says so)."
        )


@dataclass(slots=True)
class VaultStart:
    """What the start found: lines for the recovery report, the record it goes on
    from, the restore to report (its file is removed once the report is journaled),
    and audit records to write once the audit log is open."""

    notes: list[str] = field(default_factory=list)
    previous: Acknowledged | None = None
    restored: Restored | None = None
    audit: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def check_at_start(home: Home, key: VaultKey | None, *, journal: bool = True) -> VaultStart:
    """Raise VaultCorrupt for a damaged vault, VaultWentBack for a journal behind what
    was acknowledged; otherwise what the recovery report is to say. Reads only.
    `journal`: the journal is in the vault (sessions.db); a journal on a server is the
    server's to keep whole, and only the vault's own files are checked."""
    check = integrity.check_vault(home.vault_dir, key)
    keep_check(home, check)
    damaged = check.refusal(home.vault_dir)
    if damaged is not None:
        raise damaged
    found = VaultStart()
    if not journal:
        return found
    mark = marks.journal_mark(home.sessions_db, key)
    if mark is None:
        # not a pfar journal (opening it says so), or one older than the event bus,
        # which its migration adds: no record can be ahead of it
        return found
    record = acknowledged.read(home.vault_dir)
    found.restored = restored.read(home.vault_dir)
    if found.restored is not None and record == found.restored.previous:
        record = None  # the restore did not get to remove it: it vouched for the old vault
    short = shortfall(home, key, record, mark)
    if short is not None and not short.after_power_cut:
        raise short.refusal(home)
    if short is not None:
        first, last = short.lost or (0, 0)
        found.notes.append(
            f"The journal came back behind what the kernel had acknowledged after the "
            f"machine restarted: events {_range(first, last)} are lost; "
            f"{_tasks(short.missing, NAMED_IN_REPORT)}. With [vault] synchronous = "
            '"NORMAL" the last commits before a power cut may be lost; set it to "FULL" '
            "for commits that survive one."
        )
        found.audit.append(
            ("vault_lost_at_power_cut", {"events": [first, last], "tasks": short.missing})
        )
    if isinstance(record, Acknowledged):
        found.previous = record
        for event in accepted_since(home, key, record.position):
            found.notes.append(_accepted_note(event))
    if found.restored is not None:
        missing = missing_tasks(home, key, mark.newest)
        found.notes.append(_restored_note(found.restored, missing))
        found.audit.append(("vault_restored", _restored_audit(found.restored, missing)))
    return found


def keep_check(home: Home, check: integrity.VaultCheck) -> None:
    try:
        integrity.write_last_check(home.vault_dir, check)
    except OSError as exc:  # a report about the vault, not the vault: the start goes on
        log.warning("%s: not written (%s)", home.vault_dir / integrity.LAST_CHECK, exc)


def shortfall(
    home: Home,
    key: VaultKey | None,
    record: Acknowledged | Unreadable | None,
    mark: JournalMark,
) -> Shortfall | None:
    if record is None:
        return None  # no record yet: nothing was vouched for
    if isinstance(record, Acknowledged) and record.position <= mark.position:
        return None
    return Shortfall(mark, record, missing_tasks(home, key, mark.newest))


@dataclass(frozen=True, slots=True)
class Accepted:
    """A loss the owner accepted: the journal's events `first`..`last` (and `tasks`)."""

    seq: int
    at: str
    first: int | None
    last: int | None
    tasks: list[str]
    unreadable: str | None = None  # the record could not be read: what was lost is unknown


def accepted_since(home: Home, key: VaultKey | None, position: int) -> list[Accepted]:
    found = []
    for event in marks.events_after(home.sessions_db, key, position, ACCEPTED):
        body: dict[str, Any] = event.body if isinstance(event.body, dict) else {}
        events = body.get("events")
        first, last = events if isinstance(events, list) and len(events) == 2 else (None, None)
        tasks = [t for t in body.get("tasks") or [] if isinstance(t, str)]
        unreadable = body.get("unreadable")
        found.append(
            Accepted(
                event.seq,
                event.at,
                first,
                last,
                tasks,
                unreadable if isinstance(unreadable, str) else None,
            )
        )
    return found


def accept_loss(home: Home, key: VaultKey | None, synchronous: str, by: str) -> Accepted | None:
    """`pfar vault accept-loss`, on a home no kernel runs on (the caller holds its
    lock): journal the loss as a `VaultLossAccepted` event, move the bus's numbering
    past the lost events (an event number is never given twice), and reset the record
    to the journal as it is now. None when the journal lost nothing."""
    check = integrity.check_vault(home.vault_dir, key)
    keep_check(home, check)
    damaged = check.refusal(home.vault_dir)
    if damaged is not None:
        raise damaged
    record = acknowledged.read(home.vault_dir)
    mark = marks.journal_mark(home.sessions_db, key)
    if mark is None:
        return None  # a journal older than the event bus: a kernel's start migrates it
    short = shortfall(home, key, record, mark)
    if short is None:
        return None
    at = now_rfc3339()
    lost = short.lost
    body: dict[str, Any] = {
        "events": list(lost) if lost else None,
        "tasks": short.missing,
        "journal_position": mark.position,
        "acknowledged_at": None if isinstance(short.record, Unreadable) else short.record.at,
        "by": by,
    }
    if isinstance(short.record, Unreadable):
        body["unreadable"] = short.record.reason
    past = lost[1] if lost else mark.position
    # the next event is numbered past the lost ones
    seq = marks.append_past(home.sessions_db, key, past=past, kind=ACCEPTED, body=body, at=at)
    # the record stops short of the acceptance: the next start finds the event after it
    # and reports it (once its report is journaled, the record moves past it)
    previous = short.record if isinstance(short.record, Acknowledged) else None
    acknowledged.replace(home.vault_dir, _fresh(seq - 1, previous, synchronous))
    return Accepted(
        seq,
        at,
        lost[0] if lost else None,
        lost[1] if lost else None,
        short.missing,
        body.get("unreadable"),
    )


def _fresh(position: int, previous: Acknowledged | None, synchronous: str) -> Acknowledged:
    return Acknowledged(
        position,
        previous.commits if previous else 0,
        now_rfc3339(),
        f"pid {os.getpid()}",
        acknowledged.machine_boot(),
        synchronous,
        None,
    )


def accepted_text(accepted: Accepted) -> str:
    """What `pfar vault accept-loss` says it did."""
    if accepted.unreadable is not None:
        what = f"the unreadable record ({accepted.unreadable}) was replaced"
    else:
        what = f"events {_range(accepted.first or 0, accepted.last or 0)} are gone for good"
    return (
        f"accepted: {what}; {_tasks(accepted.tasks, NAMED_IN_ERROR, full=True)}. Journaled "
        f"as event {accepted.seq} ({ACCEPTED}); the next start runs, and its recovery report "
        "says what was lost."
    )


def _accepted_note(accepted: Accepted) -> str:
    if accepted.unreadable is not None:
        what = (
            f"A fresh record of acknowledged work was made with `pfar vault accept-loss` "
            f"({accepted.at}) in place of one that could not be read ({accepted.unreadable}): "
            "whether work was lost before it is not known"
        )
    else:
        what = (
            f"The loss of journal events {_range(accepted.first or 0, accepted.last or 0)} "
            f"was accepted with `pfar vault accept-loss` ({accepted.at})"
        )
    return f"{what}; {_tasks(accepted.tasks, NAMED_IN_REPORT)}. They are not recovered."


def _restored_note(r: Restored, missing: list[str]) -> str:
    if r.problem is not None and not r.made_at:
        return (
            f"The vault was restored from a backup ({r.path} {r.problem}): its tasks are "
            "as of that backup; what was lost since it cannot be told."
        )
    held = f" ({r.tasks} task{'s' if r.tasks != 1 else ''})" if r.tasks is not None else ""
    said = f"The vault was restored from the backup made at {r.made_at or 'an unknown time'}"
    said += f" (restored {r.restored_at})" if r.restored_at else ""
    said += f": tasks are as of that backup{held}. "
    lost = r.lost
    if lost is not None:
        said += f"Lost since the backup: events {_range(*lost)}; "
        said += f"{_tasks(missing, NAMED_IN_REPORT)}."
    elif r.previous is None:
        said += "What was acknowledged after the backup is not known (no record was kept "
        said += f"before the restore); {_tasks(missing, NAMED_IN_REPORT)}."
    else:
        said += "Nothing acknowledged after the backup was lost."
    return said


def _restored_audit(r: Restored, missing: list[str]) -> dict[str, Any]:
    return {
        "backup_made_at": r.made_at,
        "restored_at": r.restored_at,
        "backup_position": r.position,
        "previous_position": r.previous.position if r.previous else None,
        "lost_events": list(r.lost) if r.lost else None,
        "tasks": missing,
    }


def _range(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}–{last}"


def _tasks(ids: list[str], at_most: int, *, full: bool = False) -> str:
    if not ids:
        return "no task that the audit log, owner.log or workspaces/ name is missing from it"
    shown = [t if full else t[:8] for t in ids[:at_most]]
    more = f" and {len(ids) - at_most} more" if len(ids) > at_most else ""
    n = len(ids)
    return (
        f"{n} task{'s' if n != 1 else ''} the audit log, owner.log or workspaces/ name "
        f"{'is' if n == 1 else 'are'} missing from it: {', '.join(shown)}{more}"
    )
