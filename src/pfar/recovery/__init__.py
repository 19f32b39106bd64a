"""Recovery: what each unfinished task needs after a restart, and the owner's report."""

from .actions import (
    Decision,
    RecoveryAction,
    StepRecovery,
    decide,
    determine_recovery_action,
    should_retry_step,
)
from .recover import RecoveryPlan, plan_recovery, recover_tasks
from .report import RecoveryReport

__all__ = [
    "Decision",
    "RecoveryAction",
    "RecoveryPlan",
    "RecoveryReport",
    "StepRecovery",
    "decide",
    "determine_recovery_action",
    "plan_recovery",
    "recover_tasks",
    "should_retry_step",
]
