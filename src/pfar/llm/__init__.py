"""Models behind one chat interface: records, streamed events, providers, the proxy."""

from .events import ChatEvent, EventSink, Finished, Retrying, TextDelta, ToolCallDelta, ToolCallDone
from .messages import (
    ChatRequest,
    ChatResponse,
    Message,
    StopReason,
    ToolCall,
    ToolResult,
    ToolSchema,
    Usage,
)
from .proxy import ChatModel, InferenceProxy
from .scripted import ScriptedChatModel, reply

__all__ = [
    "ChatEvent",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "EventSink",
    "Finished",
    "InferenceProxy",
    "Message",
    "Retrying",
    "ScriptedChatModel",
    "StopReason",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallDone",
    "ToolResult",
    "ToolSchema",
    "Usage",
    "reply",
]
