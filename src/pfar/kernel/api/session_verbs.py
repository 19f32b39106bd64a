"""The operator API's verbs for long-lived sessions and traced workflows, a part of
`Operator` kept in a module of its own (operator.py holds the rest)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...answers import Actor
from .records import TaskRef
from .views import SessionView

if TYPE_CHECKING:
    from ..kernel import Kernel


class SessionVerbs:
    """What `Operator` does with sessions and workflows: each verb acts on its kernel as
    the operator's actor."""

    _kernel: Kernel
    actor: Actor

    # -- traced workflows ------------------------------------------------------------

    async def start_workflow(self, definition: str, directory: str) -> TaskRef:
        """Run the workflow `definition` (a file) in `directory`."""
        return TaskRef.of(await self._kernel.start_workflow(definition, directory))

    async def resume_workflow(self, directory: str) -> TaskRef:
        """Go on with the workflow in `directory` (its trace is checked first)."""
        return TaskRef.of(await self._kernel.resume_workflow(directory, self.actor))

    # -- sessions ----------------------------------------------------------------------

    async def new_session(self, project_path: str, thread_id: str) -> SessionView:
        """A CREATED session bound to a project directory (an absolute path) and a thread."""
        return SessionView.of(await self._kernel.sessions.create(project_path, thread_id))

    async def resume_session(self, session_id: str) -> SessionView:
        """Start the session's agent (CREATED or PAUSED -> ACTIVE)."""
        return SessionView.of(await self._kernel.sessions.resume(session_id))

    async def pause_session(self, session_id: str) -> SessionView:
        """Stop the agent, keep the session (ACTIVE -> PAUSED)."""
        return SessionView.of(await self._kernel.sessions.pause(session_id))

    async def terminate_session(self, session_id: str) -> SessionView:
        """End the session for good."""
        return SessionView.of(await self._kernel.sessions.terminate(session_id))
