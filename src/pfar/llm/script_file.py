"""A script file as a scripted chat model's handler (the `scripted` provider's `llm.script`).

One TOML file holds `[[turns]]` (the model's side of conversations: `turn_script`) and
`[[responses]]` (answers to the pipeline's phases: `phase_script`). A request from a
pipeline phase (its `context` names the phase) is answered by the responses, any other
by the turns. A running kernel re-reads the file when it changes; an edit that does
not parse fails the call that found it, naming the file. See docs/scripts.md.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..config import validate_model
from ..errors import ConfigError, ProviderError
from ..vault.perms import check_private
from .messages import ChatRequest, ChatResponse
from .phase_script import ScriptedResponse, answer_phase, compile_responses
from .scripted import ScriptedChatModel
from .turn_script import ScriptedTurn, answer_turn, compile_turns


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    responses: list[ScriptedResponse] = []
    turns: list[ScriptedTurn] = []


class ScriptHandler:
    """Answers chat requests from a `Script` (see the module docstring)."""

    def __init__(self, script: Script, source: str = "<script>") -> None:
        self._source = source
        self._path: Path | None = None
        self._stamp: tuple[int, int] | None = None
        self._compile(script)

    @classmethod
    def load(cls, path: Path) -> ScriptHandler:
        handler = cls(_read(path), str(path))
        handler._path = path
        handler._stamp = _stamp(path)
        return handler

    def _compile(self, script: Script) -> None:
        self._responses = compile_responses(script.responses, self._source)
        self._turns = compile_turns(script.turns, self._source)

    def _refresh(self) -> None:
        """Pick up an edited script file; a broken edit fails the call, naming the file."""
        if self._path is None:
            return
        stamp = _stamp(self._path)
        if stamp == self._stamp:
            return
        try:
            self._compile(_read(self._path))
        except ConfigError as exc:
            raise ProviderError(f"scripted provider: {exc}") from None
        self._stamp = stamp

    async def __call__(self, request: ChatRequest) -> ChatResponse:
        self._refresh()
        if "phase" in request.context:
            return await answer_phase(self._responses, request, self._source)
        return await answer_turn(self._turns, request, self._source)


def load_scripted_model(path: Path) -> ScriptedChatModel:
    """The scripted chat model a script file describes (checked now: a bad file stops
    the start that loads it)."""
    return ScriptedChatModel(ScriptHandler.load(path))


def _read(path: Path) -> Script:
    if not path.exists():
        raise ConfigError(str(path), "", "script file not found (config key llm.script)")
    check_private(path)  # the model's answers decide what runs: only the owner writes them
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None
    return validate_model(Script, data, path)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size)
