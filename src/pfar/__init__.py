"""pfar: a personal agent kernel that never loses work.

The Python API is as usable as the `pfar` command it sits under:

    from pfar import Home, init_home, open_kernel

    home = Home.from_env("/tmp/pfar-home")
    init_home(home)
    async with open_kernel(home) as kernel:
        task = await kernel.submit("note", "buy milk")
        await kernel.wait_idle()
"""

from .cli.setup_home import init_home
from .config import Config
from .errors import PfarError
from .journal import Journal, PersistedTaskState, TaskRecord, TaskState
from .kernel.kernel import Kernel, open_kernel
from .recovery import RecoveryReport
from .vault.home import Home

__all__ = [
    "Config",
    "Home",
    "Journal",
    "Kernel",
    "PersistedTaskState",
    "PfarError",
    "RecoveryReport",
    "TaskRecord",
    "TaskState",
    "init_home",
    "open_kernel",
]
