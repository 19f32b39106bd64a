"""The OpenAI provider: chat completions over a stream, for OpenAI and compatible servers.

Speaks the chat-completions wire format through the official `openai` SDK, so it
also drives OpenAI-compatible local servers (Ollama, vLLM, llama.cpp): it
tolerates a missing usage chunk, tool calls without ids, and any non-empty api
key. The SDK never retries (`max_retries=0`): the error table of seed 001,
Phase 3 (`retry.py`) decides, and every wait goes through the injected `sleep`.

One idea per module:

* `provider`: the call and its retries, the partial-stream rule, the api key;
* `request`: a `ChatRequest` as the keyword arguments of `chat.completions.create`;
* `stream`: the streamed chunks folded into a `ChatResponse`, passing events on;
* `tool_calls`: the model's tool calls checked against the request's tools;
* `error_table`: an SDK error as the `AttemptFailed` the retry table acts on.
"""

from .provider import OpenAIProvider
from .request import build_params
from .tool_calls import validate

__all__ = ["OpenAIProvider", "build_params", "validate"]
