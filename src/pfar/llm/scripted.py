"""The scripted provider: replays a TOML file of responses per phase (tests, demo, offline use).

Responses are chosen by (template, phase, optional regex on the task's input),
never by call order, so a phase retried after a crash gets the same answer.
See docs/scripts.md for the format.

A `match` pattern is the script author's and the input is anyone's: a pattern that
backtracks catastrophically must not stall the kernel. Matching uses the `regex`
package, whose matcher stops itself at a timeout (a thread cannot interrupt `re`,
and a subprocess per match would cost more than the match), in a worker thread with
the GIL released, so the event loop (control socket, other tasks, model timeouts)
runs on while it matches.
"""

from __future__ import annotations

import asyncio
import json
import string
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex
from pydantic import BaseModel, ConfigDict, Field

from ..config import validate_model
from ..errors import ConfigError, ProviderError
from ..vault.perms import check_private
from .messages import ChatRequest, ChatResponse, StopReason, ToolCall, Usage
from .provider import LLMRequest, LLMResponse


class ScriptedResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phase: str = Field(pattern="^(extract|plan|synthesize)$")
    template: str = "*"
    match: str | None = None
    json_: dict[str, Any] | None = Field(default=None, alias="json")
    text: str | None = None
    delay_seconds: float = Field(0, ge=0)
    error: str | None = None  # answer with a provider error instead


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    responses: list[ScriptedResponse] = []


# how long one `match` may search one input; a sane pattern takes microseconds
MATCH_TIMEOUT_SECONDS = 1.0


@dataclass(slots=True)
class _Compiled:
    spec: ScriptedResponse
    pattern: regex.Pattern[str] | None
    key: str  # e.g. responses.3.match, for messages


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script: Script, source: str = "<script>") -> None:
        self._source = source
        self._path: Path | None = None
        self._stamp: tuple[int, int] | None = None
        self._responses = _compile(script, source)

    @classmethod
    def load(cls, path: Path) -> ScriptedProvider:
        provider = cls(_read(path), str(path))
        provider._path = path
        provider._stamp = _stamp(path)
        return provider

    def _refresh(self) -> None:
        """Pick up an edited script file; a broken edit fails the call, naming the file."""
        if self._path is None:
            return
        stamp = _stamp(self._path)
        if stamp == self._stamp:
            return
        try:
            self._responses = _compile(_read(self._path), str(self._path))
        except ConfigError as exc:
            raise ProviderError(f"scripted provider: {exc}") from None
        self._stamp = stamp

    async def _find(self, req: LLMRequest) -> ScriptedResponse | None:
        self._refresh()
        for c in self._responses:
            r = c.spec
            if r.phase != req.phase or r.template not in ("*", req.template_id):
                continue
            if c.pattern is not None and not await self._search(c, c.pattern, req.input_text):
                continue
            return r
        return None

    async def _search(self, c: _Compiled, pattern: regex.Pattern[str], text: str) -> bool:
        try:
            found = await asyncio.to_thread(
                pattern.search, text, timeout=MATCH_TIMEOUT_SECONDS, concurrent=True
            )
        except TimeoutError:
            raise ProviderError(
                f"scripted provider: {self._source}: {c.key}: the pattern {pattern.pattern!r} "
                f"took more than {MATCH_TIMEOUT_SECONDS:g}s on this task's input "
                "(it backtracks catastrophically: simplify it)"
            ) from None
        return found is not None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        r = await self._find(request)
        if r is None:
            return self._default(request)
        if r.delay_seconds:
            await asyncio.sleep(r.delay_seconds)
        if r.error:
            raise ProviderError(f"scripted provider: {r.error}")
        subs = _substitutions(request)
        if r.json_ is not None:
            return LLMResponse(data=_fill(r.json_, subs))
        return LLMResponse(text=_fill(r.text or "", subs))

    def _default(self, req: LLMRequest) -> LLMResponse:
        if req.phase == "extract":
            return LLMResponse(data={"text": req.input_text})
        if req.phase == "synthesize":
            return LLMResponse(text=f"Done: {req.template_id} ({len(req.step_results)} steps).")
        raise ProviderError(
            f"scripted provider: {self._source} has no plan for template {req.template_id!r}"
        )


def _read(path: Path) -> Script:
    if not path.exists():
        raise ConfigError(str(path), "", "script file not found (config key llm.script)")
    check_private(path)  # the model's answers decide what runs: only the owner writes them
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None
    return validate_model(Script, data, path)


def _compile(script: Script, source: str) -> list[_Compiled]:
    compiled = []
    for i, r in enumerate(script.responses):
        key = f"responses.{i}.match"
        try:
            pattern = regex.compile(r.match) if r.match else None
        except regex.error as exc:
            raise ConfigError(source, key, f"bad regex: {exc}") from None
        compiled.append(_Compiled(r, pattern, key))
    return compiled


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _substitutions(req: LLMRequest) -> dict[str, str]:
    subs = {"input": req.input_text, "task_id": req.task_id, "template": req.template_id}
    for i, result in enumerate(req.step_results):
        subs[f"step{i}"] = _as_text(result)
    for key, value in req.metadata.items():
        subs[f"meta_{key}"] = _as_text(value)
    return subs


def _as_text(value: Any) -> str:
    if isinstance(value, dict):
        for key in ("body", "stdout", "content", "text"):
            if isinstance(value.get(key), str):
                return str(value[key]).strip()
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _fill(value: Any, subs: dict[str, str]) -> Any:
    if isinstance(value, str):
        return string.Template(value).safe_substitute(subs)
    if isinstance(value, dict):
        return {k: _fill(v, subs) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, subs) for v in value]
    return value


class ScriptedChatProvider:
    """The scripted provider behind the inference proxy: it answers chat requests from
    the script, as tool calls (extract, plan) or text (synthesize), so a scripted task
    takes the same path as one on a real model: proxy, rate limit, accounting."""

    name = "scripted"

    def __init__(self, script: ScriptedProvider) -> None:
        self._script = script
        self._calls = 0

    async def chat(self, request: ChatRequest) -> ChatResponse:
        ctx = request.context
        started = time.monotonic()
        phase = str(ctx.get("phase", "synthesize"))
        if phase not in ("extract", "plan", "synthesize"):
            raise ProviderError(f"scripted provider: unknown phase {phase!r}")
        answer = await self._answer(request, phase)
        self._calls += 1
        elapsed = time.monotonic() - started
        if request.tool_choice is not None:
            data = answer.data if answer.data is not None else {"text": answer.text or ""}
            call = ToolCall(f"scripted_{self._calls}", request.tool_choice, data)
            return ChatResponse(
                "", (call,), StopReason.tool_use, Usage(), request.model, elapsed, elapsed
            )
        text = answer.text if answer.text is not None else json.dumps(answer.data)
        return ChatResponse(text, (), StopReason.end_turn, Usage(), request.model, elapsed, elapsed)

    async def _answer(self, request: ChatRequest, phase: str) -> LLMResponse:
        """The script's answer; one attempt, bounded like a real model's (no retries)."""
        ctx = request.context
        seconds = request.attempt_timeout
        try:
            async with asyncio.timeout(seconds):
                return await self._complete(ctx, phase)
        except TimeoutError:
            raise ProviderError(
                f"scripted provider: no answer within {seconds:g}s (llm_seconds)"
            ) from None

    async def _complete(self, ctx: dict[str, Any], phase: str) -> LLMResponse:
        return await self._script.complete(
            LLMRequest(
                phase=phase,  # type: ignore[arg-type]
                template_id=str(ctx.get("template_id", "")),
                input_text=str(ctx.get("input_text", "")),
                task_id=str(ctx.get("task_id", "")),
                metadata=dict(ctx.get("metadata") or {}),
                step_results=list(ctx.get("step_results") or []),
                tools=list(ctx.get("tools") or []),
            )
        )
