"""The SQLite task store: tasks, their steps and their model calls (`store.TaskStore`).

Its verbs come in three families, each in a module of its own: `task_reads`,
`step_writes` (a task as it executes) and `task_writes` (the rest of a task's life).
"""

from __future__ import annotations

from .backing import Backing
from .step_writes import StepWrites
from .task_reads import TaskReads
from .task_writes import TaskWrites


class SQLiteTaskStore(TaskReads, StepWrites, TaskWrites):
    def __init__(self, db: Backing) -> None:
        self._db = db
