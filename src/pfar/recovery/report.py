"""The owner's recovery report (spec §7.4): one message after every restart."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..journal.boot_reports import MAX_LINKED, ReportLine, ReportLineKind, StoredReport

# names listed on one line of the report; a restart after a flood must stay one message
MAX_NAMES = 5


@dataclass(slots=True)
class RecoveryReport:
    retried: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    # resumed at a write a crash cut off that is checked or sent again under its key: one
    # that needs the owner's approval asks for it again first
    at_cut_off_write: list[str] = field(default_factory=list)
    # resumed at a write in doubt: the owner is asked before anything runs
    asked: list[str] = field(default_factory=list)
    # task id -> kernel deaths in a row it was in flight for: parked on a question
    # (resume or abandon); nothing runs before the answer
    parked: dict[str, int] = field(default_factory=dict)
    reprompted: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)  # the owner's cancel, finished now
    paused: list[str] = field(default_factory=list)  # the owner's pause: left alone
    # loop tasks waiting for the owner's next message: they keep waiting
    waiting: list[str] = field(default_factory=list)
    # loop tasks waiting on a subtask (their Task call): they go on when it ends
    blocked: list[str] = field(default_factory=list)
    # tasks that waited for a slot or rate headroom: they wait again, in their turn
    queued: list[str] = field(default_factory=list)
    # task id -> what is wrong with its row (field: problem): left exactly as it is
    malformed: dict[str, str] = field(default_factory=dict)
    orphan_containers: int = 0
    orphan_processes: int = 0  # processes of interrupted steps that outlived the kernel
    # messages a chat channel was sending when the kernel died: they may have arrived,
    # so they are not sent again
    channel_doubts: int = 0
    sessions_recovered: list[str] = field(default_factory=list)  # ACTIVE -> PAUSED (seed 004)
    # cron templates with slots missed while pfar was down: what was caught up or skipped
    schedules: list[str] = field(default_factory=list)
    # task id -> how the report describes it
    descriptions: dict[str, str] = field(default_factory=dict)
    reprompt_kinds: dict[str, str] = field(default_factory=dict)  # "approval" | "credential"
    # what the start found about the vault itself (kernel/vault_start.py): a restore from
    # a backup, a loss the owner accepted; said first, since every line after rests on it
    vault: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.vault
            or self.retried
            or self.resumed
            or self.at_cut_off_write
            or self.asked
            or self.parked
            or self.reprompted
            or self.abandoned
            or self.cancelled
            or self.paused
            or self.waiting
            or self.blocked
            or self.queued
            or self.malformed
            or self.orphan_containers
            or self.orphan_processes
            or self.channel_doubts
            or self.sessions_recovered
            or self.schedules
        )

    def to_json(self) -> dict[str, object]:
        return {
            "retried": self.retried,
            "resumed": self.resumed,
            "at_cut_off_write": self.at_cut_off_write,
            "asked": self.asked,
            "parked": list(self.parked),
            "reprompted": self.reprompted,
            "abandoned": self.abandoned,
            "cancelled": self.cancelled,
            "paused": self.paused,
            "waiting": self.waiting,
            "blocked": self.blocked,
            "queued": self.queued,
            "malformed": self.malformed,
            "orphan_containers": self.orphan_containers,
            "orphan_processes": self.orphan_processes,
            "channel_doubts": self.channel_doubts,
            "sessions_recovered": self.sessions_recovered,
            "schedules": self.schedules,
            "descriptions": self.descriptions,
            "vault": self.vault,
        }

    def _names(self, ids: list[str]) -> str:
        """The tasks of one line: a name the same for many tasks once, with its count after
        a multiplication sign; at most MAX_NAMES names, then how many tasks are unnamed."""
        counts: dict[str, int] = {}
        for t in ids:
            name = self.descriptions.get(t, t[:8])
            counts[name] = counts.get(name, 0) + 1
        shown = list(counts.items())[:MAX_NAMES]
        names = [name if n == 1 else f"{name} ×{n}" for name, n in shown]
        # "too old: A from 25 min ago, B from 15 min ago": the reason said once
        said: set[str] = set()
        for i, name in enumerate(names):
            reason, sep, rest = name.partition(": ")
            if sep and reason == "too old":
                names[i] = rest if reason in said else name
                said.add(reason)
        left = len(ids) - sum(n for _, n in shown)
        if left:
            names.append(f"and {left} more")
        return ", ".join(names)

    def render(self) -> str:
        """The report as the owner is sent it."""
        return self.stored().text

    def stored(self) -> StoredReport:
        """The report as its boot keeps it: the text sent, and each line with its tasks
        (the lines are made once, for both)."""
        lines = tuple(self.lines())
        if self.empty:
            return StoredReport("System restarted. No pending tasks to recover.", lines)
        head = "System restarted. Recovery report:"
        return StoredReport("\n".join([head, *(f" - {line.text}" for line in lines)]), lines)

    def lines(self) -> list[ReportLine]:
        """Each line of the report, in the order it is sent, with the tasks it names."""
        K = ReportLineKind
        lines = [ReportLine(K.vault, note) for note in self.vault]

        def line(kind: ReportLineKind, ids: list[str], one: str, many: str, verb: str) -> None:
            if ids:
                what = self._names(ids)
                text = f"{len(ids)} {one if len(ids) == 1 else many} {verb} ({what})"
                kept = tuple(ids[:MAX_LINKED])
                lines.append(ReportLine(kind, text, kept, len(ids) - len(kept)))

        line(K.retried, self.retried, "task", "tasks", "retried")
        line(K.resumed, self.resumed, "task", "tasks", "resumed")
        line(
            K.at_cut_off_write,
            self.at_cut_off_write,
            "task",
            "tasks",
            "resumed at a write the crash cut off: it is checked, or sent again under its "
            "idempotency key; one that needs your approval asks you again first",
        )
        line(
            K.asked,
            self.asked,
            "task",
            "tasks",
            "resumed at a write in doubt: the owner is asked to retry, skip or fail",
        )
        for deaths in sorted(set(self.parked.values())):
            line(
                K.parked,
                [t for t, n in self.parked.items() if n == deaths],
                "task",
                "tasks",
                f"parked: in flight during {deaths} kernel deaths in a row with no progress; "
                "the owner is asked to resume or abandon",
            )
        approvals = [t for t in self.reprompted if self.reprompt_kinds.get(t) != "credential"]
        creds = [t for t in self.reprompted if self.reprompt_kinds.get(t) == "credential"]
        line(K.approval_resent, approvals, "approval", "approvals", "re-sent")
        line(K.credential_resent, creds, "credential prompt", "credential prompts", "re-sent")
        line(K.abandoned, self.abandoned, "task", "tasks", "abandoned")
        line(
            K.cancelled,
            self.cancelled,
            "task",
            "tasks",
            "cancelled, as the owner asked before the restart",
        )
        line(K.paused, self.paused, "task", "tasks", "left paused")
        line(K.waiting, self.waiting, "task", "tasks", "still waiting for your message (pfar send)")
        blocked = "waiting on a subtask; they go on when it ends"
        line(K.blocked, self.blocked, "task", "tasks", blocked)
        line(K.queued, self.queued, "task", "tasks", "queued again for a slot; they start in turn")
        for task_id, problem in self.malformed.items():
            text = (
                f"task {task_id[:8]} left as it is: its journal row is malformed ({problem}); "
                f"`pfar cancel {task_id[:8]}` ends it"
            )
            lines.append(ReportLine(K.malformed, text, (task_id,)))
        if self.sessions_recovered:
            n = len(self.sessions_recovered)
            text = f"Recovered {n} session{'s' if n != 1 else ''} after crash (paused)"
            lines.append(ReportLine(K.sessions, text))
        if self.orphan_processes:
            n = self.orphan_processes
            text = f"{n} orphaned process{'es' if n != 1 else ''} cleaned up"
            lines.append(ReportLine(K.orphan_processes, text))
        if self.orphan_containers:
            n = self.orphan_containers
            text = f"{n} orphaned sandbox{'es' if n != 1 else ''} killed"
            lines.append(ReportLine(K.orphan_sandboxes, text))
        lines += [ReportLine(K.schedule, f"schedule {said}") for said in self.schedules]
        if self.channel_doubts:
            n = self.channel_doubts
            text = (
                f"{n} message{'s' if n != 1 else ''} to a chat channel cut off while being "
                "sent: it may have arrived, so it is not sent again (owner.log has every "
                "message)"
            )
            lines.append(ReportLine(K.channel_doubts, text))
        return lines
