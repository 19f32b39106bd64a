"""The operator API: the one typed API that every surface calls.

`HomeReader` reads a home (tasks, timelines, questions, sessions, workflows) with or
without a running kernel; `Operator` is a running kernel's: those reads plus the verbs
that act (submit, answer, cancel / pause / resume / retry, secrets, sessions, workflows,
status). Every verb returns a frozen record with `to_json`; `requests.COMMANDS` maps
the control socket's ops onto the verbs.
"""

from ..holds import HoldResult
from ..retrying import RetryResult
from .operator import Operator
from .reader import MAX_LIMIT, HomeReader, PlannedRecovery, RecoveryPreview
from .records import (
    Answered,
    BusEventView,
    Pong,
    Questions,
    SecretStored,
    Submitted,
    TaskListing,
    TaskRef,
    TaskSummary,
    TaskTimeline,
)
from .timeline_entries import TimelineEntry
from .workflow_check import WorkflowCheck

__all__ = [
    "MAX_LIMIT",
    "Answered",
    "BusEventView",
    "HoldResult",
    "HomeReader",
    "Operator",
    "PlannedRecovery",
    "Pong",
    "Questions",
    "RecoveryPreview",
    "RetryResult",
    "SecretStored",
    "Submitted",
    "TaskListing",
    "TaskRef",
    "TaskSummary",
    "TaskTimeline",
    "TimelineEntry",
    "WorkflowCheck",
]
