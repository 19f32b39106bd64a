"""pfar: a personal agent kernel that never loses work.

The Python API is as usable as the `pfar` command it sits under:

    from pfar import Home, Operator, init_home, open_kernel

    home = Home.from_env("/tmp/pfar-home")
    init_home(home)
    async with open_kernel(home) as kernel:
        operator = Operator(kernel)
        task = await operator.submit("note", "buy milk")
        await operator.wait_idle()
        print(operator.timeline(task.task_id).task.state)

`Operator` is the operator API every surface calls (the control socket, the CLI,
chat adapters); `HomeReader(home)` has its reads without a running kernel. Their
records are in `pfar.kernel.api`. The owner's answers are the records of
`pfar.answers` (`parse_answer` reads one from text).
"""

from .answers import Answer, parse_answer
from .config import Config
from .errors import PfarError
from .journal import Journal, PersistedTaskState, TaskRecord, TaskState
from .kernel.api import HomeReader, Operator
from .kernel.kernel import Kernel, open_kernel
from .kernel.setup_home import init_home
from .recovery import RecoveryReport
from .vault.home import Home

__all__ = [
    "Answer",
    "Config",
    "Home",
    "HomeReader",
    "Journal",
    "Kernel",
    "Operator",
    "PersistedTaskState",
    "PfarError",
    "RecoveryReport",
    "TaskRecord",
    "TaskState",
    "init_home",
    "open_kernel",
    "parse_answer",
]
