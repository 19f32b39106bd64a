"""The hook points of seed 001's "Hook Points Overview", and what a handler may do at each.

Every point can be observed. Beyond that a point allows what the seed gives it: to
modify named fields of what passes through, to block the action, to inject context,
or (at a question of security) to allow what would otherwise be refused or asked. A
handler's decision that the point does not allow is refused as nonsense, naming the
point and what it allows.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

Capability = Literal["observe", "modify", "block", "inject", "allow"]


class HookPoint(StrEnum):
    # task lifecycle (fired from the event bus, after the move's commit)
    TaskCreated = "TaskCreated"
    TaskScheduled = "TaskScheduled"
    TaskStarted = "TaskStarted"
    TaskPaused = "TaskPaused"
    TaskResumed = "TaskResumed"
    TaskCompleted = "TaskCompleted"
    TaskFailed = "TaskFailed"
    TaskCancelled = "TaskCancelled"
    # loop iteration
    PreContextAssembly = "PreContextAssembly"
    PostContextAssembly = "PostContextAssembly"
    PreLLMCall = "PreLLMCall"
    PostLLMCall = "PostLLMCall"
    PreToolUse = "PreToolUse"
    PostToolUse = "PostToolUse"
    PreUserPrompt = "PreUserPrompt"
    PostUserInput = "PostUserInput"
    LoopIteration = "LoopIteration"
    # cross-task
    LearningExtracted = "LearningExtracted"
    KnowledgeQuery = "KnowledgeQuery"
    KnowledgeInjected = "KnowledgeInjected"
    ResourceLockWait = "ResourceLockWait"
    ResourceLockAcquired = "ResourceLockAcquired"
    ResourceLockReleased = "ResourceLockReleased"
    SubtaskSpawned = "SubtaskSpawned"
    # security
    SecurityPolicyCheck = "SecurityPolicyCheck"
    SecurityViolation = "SecurityViolation"
    PermissionRequest = "PermissionRequest"
    PermissionGranted = "PermissionGranted"
    PermissionDenied = "PermissionDenied"
    AnomalyDetected = "AnomalyDetected"


LIFECYCLE = frozenset(
    {
        HookPoint.TaskCreated,
        HookPoint.TaskScheduled,
        HookPoint.TaskStarted,
        HookPoint.TaskPaused,
        HookPoint.TaskResumed,
        HookPoint.TaskCompleted,
        HookPoint.TaskFailed,
        HookPoint.TaskCancelled,
    }
)

# a handler that fails, hangs or answers nonsense here blocks the action (fails closed)
SECURITY = frozenset(
    {HookPoint.SecurityPolicyCheck, HookPoint.PermissionRequest, HookPoint.PreToolUse}
)

# the points that name a tool: a handler may be limited to some tools (`tools = [...]`)
TOOL_POINTS = frozenset(
    {
        HookPoint.PreToolUse,
        HookPoint.PostToolUse,
        HookPoint.SecurityPolicyCheck,
        HookPoint.SecurityViolation,
        HookPoint.PermissionRequest,
        HookPoint.PermissionGranted,
        HookPoint.PermissionDenied,
        HookPoint.AnomalyDetected,
    }
)

# the fields a `modify` decision may change at each point, and the JSON type of each
MODIFIABLE: dict[HookPoint, dict[str, type]] = {
    HookPoint.PostContextAssembly: {"system": str},
    HookPoint.PreLLMCall: {"model": str, "max_tokens": int},
    HookPoint.PostLLMCall: {"text": str},
    HookPoint.PreToolUse: {"input": dict},
    HookPoint.PostToolUse: {"result": object},
    HookPoint.PreUserPrompt: {"description": str},
    HookPoint.PostUserInput: {"text": str},
    HookPoint.LearningExtracted: {"content": str, "tags": list},
    HookPoint.KnowledgeQuery: {"query": str},
    HookPoint.KnowledgeInjected: {"learnings": list},
}

BLOCKING = frozenset(
    {
        HookPoint.PreContextAssembly,
        HookPoint.PostContextAssembly,
        HookPoint.PreLLMCall,
        HookPoint.PreToolUse,
        HookPoint.PostUserInput,
        HookPoint.LearningExtracted,
        HookPoint.SubtaskSpawned,
        HookPoint.SecurityPolicyCheck,
        HookPoint.PermissionRequest,
        HookPoint.AnomalyDetected,
    }
)

INJECTING = frozenset({HookPoint.PreContextAssembly, HookPoint.PreToolUse})

# `allow`: a policy's refusal overridden (SecurityPolicyCheck), a question not asked
# because the handler grants it (PermissionRequest)
ALLOWING = frozenset({HookPoint.SecurityPolicyCheck, HookPoint.PermissionRequest})


def capabilities(point: HookPoint) -> frozenset[Capability]:
    caps: set[Capability] = {"observe"}
    if point in MODIFIABLE:
        caps.add("modify")
    if point in BLOCKING:
        caps.add("block")
    if point in INJECTING:
        caps.add("inject")
    if point in ALLOWING:
        caps.add("allow")
    return frozenset(caps)


def parse_point(name: str) -> HookPoint:
    try:
        return HookPoint(name)
    except ValueError:
        raise ValueError(
            f"{name!r} is no hook point (the points are: {', '.join(p.value for p in HookPoint)})"
        ) from None
