"""The Anthropic Messages API as a provider: one streamed call, with pfar's error table.

`AnthropicProvider.chat` maps a provider-neutral `ChatRequest` to the Messages API,
streams the answer through the official SDK (`AsyncAnthropic`, `max_retries=0`: the
retrying is pfar's, per `retry.next_wait`) and folds the raw events into a
`ChatResponse`. One idea per module:

* `provider`: the call and its retries, the partial rule, the api key;
* `request`: a `ChatRequest` as the arguments of `messages.create`;
* `stream`: the raw stream events folded into a `ChatResponse`, tool calls checked;
* `error_table`: an SDK or transport error as the `AttemptFailed` the retry table acts on.
"""

from ...json_schema import validate_schema
from .provider import AnthropicProvider
from .request import build_params

__all__ = ["AnthropicProvider", "build_params", "validate_schema"]
