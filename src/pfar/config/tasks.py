"""Sections for how tasks run and are kept: `[recovery]`, `[approvals]`, `[scheduler]`,
`[journal]`."""

from __future__ import annotations

from pydantic import Field

from .section import DAY, YEAR, Section


class RecoveryConfig(Section):
    """The `[recovery]` section, exactly as the persistence spec §10 names it."""

    max_task_age_seconds: int = Field(600, gt=0, le=int(YEAR))
    shutdown_timeout_seconds: float = Field(30, ge=0, le=DAY)
    journal_retention_completed_hours: float = Field(24, ge=0, le=24 * 3650)
    journal_retention_failed_days: float = Field(7, ge=0, le=3650)
    adapter_max_retries: int = Field(5, ge=0, le=1000)
    adapter_retry_backoff_seconds: float = Field(5, ge=0, le=DAY)
    adapter_retry_backoff_max_seconds: float = Field(60, ge=0, le=DAY)
    # pfar's addition: kernel deaths in a row with a task in flight and no progress
    # before the owner is asked to resume or abandon it (it runs nothing until then).
    max_recovery_attempts: int = Field(3, gt=0, le=1000)


class ApprovalsConfig(Section):
    approval_timeout_seconds: float = Field(3600, gt=0, le=YEAR)
    credential_prompt_timeout_seconds: float = Field(600, gt=0, le=YEAR)


class SchedulerConfig(Section):
    """`[scheduler]`: how many tasks run at once (docs/config.md)."""

    # tasks whose runner runs at the same time; more wait, highest template priority
    # first (then the oldest); 0: no limit. Tasks parked on the owner count for nothing
    max_concurrent: int = Field(0, ge=0, le=10_000)
    # a loop tool call waits this long for the files, repositories and hosts it declares
    # (held by another task's call); then its result is "Resource locked by another task"
    lock_timeout_seconds: float = Field(60, gt=0, le=3600)
    # a held lock's lease: renewed by its kernel every third of it; a lock whose holder
    # stopped renewing it (a frozen kernel elsewhere) is taken after it expires
    lock_lease_seconds: float = Field(60, ge=5, le=86_400)


class JournalConfig(Section):
    cleanup_interval_hours: float = Field(24, gt=0, le=24 * 365)
