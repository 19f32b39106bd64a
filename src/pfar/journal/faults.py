"""A test-only fault hook: kill the process right after a named journal point is durable.

Off unless `PFAR_FAULT` is set, e.g. `PFAR_FAULT=step_started` (first time) or
`PFAR_FAULT=step_completed:3` (third time). Used by the crash tests to SIGKILL
the kernel at every journal point in turn.
"""

from __future__ import annotations

import os
import signal
import sys

ENV = "PFAR_FAULT"

# Every journal point the kernel names; the crash sweep walks this list.
POINTS = (
    "task_created",
    "extracted",
    "planned",
    "step_started",
    "step_completed",
    "approval_parked",
    "credential_parked",
    "approval_decided",
    "credential_received",
    "synthesizing",
    "completed",
    "failed",
    "recovery_decided",
    "message_delivered",
    "llm_request_sent",
    "llm_response_received",
    "tool_results",
    "user_input",
    "loop_summary",
    "loop_workspace",
    "loop_anomaly",
    "subtask_spawned",
    "subtask_ended",
    "bus_ack",
    "hook_verdict",
    "lock_acquired",
    "task_queued",
    "task_scheduled",
    "lock_released",
    "cancel_intended",
    "adapter_position",
    "channel_sending",
    "channel_sent",
    "session_created",
    "session_activated",
    "session_paused",
    "session_terminated",
    "learnings_decided",
    "learnings_kept",
    "task_retried",
)


class FaultHook:
    def __init__(self, spec: str | None) -> None:
        self._point: str | None = None
        self._occurrence = 1
        self._seen = 0
        if spec:
            point, _, nth = spec.partition(":")
            if point not in POINTS:
                raise ValueError(f"{ENV}={spec!r}: unknown journal point; known: {POINTS}")
            self._point = point
            self._occurrence = int(nth) if nth else 1

    @classmethod
    def from_env(cls) -> FaultHook:
        return cls(os.environ.get(ENV))

    @property
    def armed(self) -> bool:
        return self._point is not None

    def passed(self, point: str) -> None:
        """Called after the commit that made `point` durable."""
        if point != self._point:
            return
        self._seen += 1
        if self._seen == self._occurrence:
            sys.stderr.write(f"pfar: fault hook: SIGKILL after {point} #{self._seen}\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
