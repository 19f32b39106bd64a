"""Recovery: what each unfinished task needs after a restart, and the owner's report."""

from ..runners.step_rules import StepRecovery, should_retry_step
from .actions import (
    Decision,
    InFlightDeaths,
    Reason,
    RecoveryAction,
    TooOld,
    Unrecoverable,
    WriteCutOff,
    WriteInDoubt,
    decide,
    determine_recovery_action,
)
from .recover import RecoveryPlan, plan_recovery, recover_tasks
from .report import RecoveryReport

__all__ = [
    "Decision",
    "InFlightDeaths",
    "Reason",
    "RecoveryAction",
    "RecoveryPlan",
    "RecoveryReport",
    "StepRecovery",
    "TooOld",
    "Unrecoverable",
    "WriteCutOff",
    "WriteInDoubt",
    "decide",
    "determine_recovery_action",
    "plan_recovery",
    "recover_tasks",
    "should_retry_step",
]
