"""The agentic loop's coding tools: Read, Write, Edit, Bash, Glob, Grep, WebFetch.

Each works in the task's working directory (`ToolContext.workspace`) and refuses a
path outside it, naming the path. Each returns a dict whose `text` is what the model
reads (the loop shows it as the call's result) beside structured fields for the
journal (a digest, an exit code, counts). An error the model can act on is a
`ToolFailed` whose message says what to do instead.

How each survives a crash (seed 001's idempotency rules):

* Read, Glob, Grep, WebFetch change nothing: a read cut off is simply run again.
* Write and Edit check their own effect: the file already holds the content, or the
  edit's old text is gone and its new text is there.
* Bash has no way to tell: a command cut off goes to the owner.
"""

from .bash import Bash
from .edit import Edit
from .glob import Glob
from .grep import Grep
from .read import Read
from .web_fetch import WebFetch
from .write import Write

CODING_TOOLS = (Read, Write, Edit, Bash, Glob, Grep, WebFetch)

__all__ = ["CODING_TOOLS", "Bash", "Edit", "Glob", "Grep", "Read", "WebFetch", "Write"]
