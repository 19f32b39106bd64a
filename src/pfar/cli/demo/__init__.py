"""`pfar demo`: SIGKILL a kernel in the middle of real work, restart it, show that nothing
was lost and no write ran twice.

Everything is real: a temporary home with a SQLite vault, the kernel as a child
process, a loopback HTTP server that records every request (the "far side",
`far_side`), and a write log that every shell step appends to. `scenario` holds the
demo's templates and model script; `showcase` tells the story.
"""

from .showcase import run_demo

__all__ = ["run_demo"]
