"""`[loop]`: the agentic loop's tools, permission prompts, drift limits and security
layers (`[loop.policy]`, `[loop.anomaly]`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from .section import DAY, YEAR, Section


class LoopPolicyConfig(Section):
    """Layer 1 of the agentic loop's security (seed 001, 4.1): what no loop task may do,
    whatever the owner answers. A refusal is the call's result, naming the rule."""

    blocked_tools: list[str] = []
    # paths (fnmatch patterns, relative to the task's directory or absolute) no tool
    # may read or change
    protected_paths: list[str] = [".git/*", ".env", "*.pem", "*.key"]
    # built-in protected credential paths (`~/.ssh`, `~/.aws`, ... listed in
    # docs/loop.md) a loop's file tools may use anyway, e.g. ["~/.kube"]; pfar's own
    # home is always protected
    unprotect: list[str] = []
    # regular expressions: a Bash command matching one is refused
    dangerous_commands: list[str] = [
        r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*f?[a-zA-Z]*\s+(/|~|\$HOME)(\s|$)",
        r":\(\)\s*\{\s*:\|:&\s*\};:",
        r"\bmkfs(\.\w+)?\b",
        r"\bdd\b[^|;&]*\bof=/dev/",
        r"\b(curl|wget)\b[^|;&]*\|\s*(ba|z)?sh\b",
        r"\bgit\s+push\b[^|;&]*--force\b",
    ]
    # the built-in checks on the parsed command (policy/commands.py: rm -r of / or the
    # home, force pushes, a pipe into a shell ...), besides the patterns above
    builtin_dangerous_commands: bool = True
    # a result of outside data (a WebFetch page) suspends, until the owner's next
    # message, the standing answers and always_allow tools that would let a write run
    tainted_writes: bool = True
    # host names (their subdomains too), addresses or networks ("10.0.0.0/8") no URL
    # may reach; an address or network is compared with every address the host has
    blocked_hosts: list[str] = []
    # loopback, private, link-local ... targets a URL may reach all the same (only
    # public addresses otherwise): an address or network, "127.0.0.1:8080", "[::1]:8080",
    # or a host name as the URL spells it ("printer.lan", "printer.lan:631")
    allowed_private_hosts: list[str] = []

    @model_validator(mode="after")
    def _hosts_parse(self) -> LoopPolicyConfig:
        if self.blocked_hosts or self.allowed_private_hosts:
            from ..addresses import parse_allowed, parse_blocked  # loaded when used

            for i, entry in enumerate(self.blocked_hosts):
                _entry("blocked_hosts", i, entry, parse_blocked)
            for i, entry in enumerate(self.allowed_private_hosts):
                _entry("allowed_private_hosts", i, entry, parse_allowed)
        return self


def _entry(field: str, i: int, entry: str, parse: Any) -> None:
    try:
        parse(entry)
    except ValueError as exc:
        raise ValueError(f"{field}[{i}]: {exc}") from None


class LoopAnomalyConfig(Section):
    """Layer 3 (seed 001, 4.1): calls that are unusual, though allowed. Each is a warning to
    the owner; with `action = "ask"`, the call also waits for the owner's yes first."""

    # a task's writes started in the last minute; 0: not checked
    max_writes_per_minute: int = Field(30, ge=0, le=100_000)
    # a host no tool call of any task has reached before
    new_hosts: bool = True
    action: Literal["warn", "ask"] = "warn"


_RULE = r"^[\w.:-]+(\(.+\))?$"  # a standing answer's pattern: `Tool` or `Tool(what)`


class LoopConfig(Section):
    """The agentic loop (seed 001): its tools, permission prompts and drift limits."""

    # the tools a loop task offers its model
    tools: list[str] = [
        "Read",
        "Write",
        "Edit",
        "Bash",
        "Glob",
        "Grep",
        "WebFetch",
        "Task",
        "Skill",
    ]
    # layer 2: tools that never ask (reads inside the task's directory, and Skill, which
    # reads only the skills the task was given, confined to their folders)
    always_allow: list[str] = ["Read", "Glob", "Grep", "Skill"]
    # standing answers the owner writes as patterns: `Tool` (every call), `Tool(what)`
    # (exactly this), `Bash(npm run test:*)` (one command starting with these words),
    # `Write(src/*)` (a glob over the path or host); `deny` wins over `allow`
    allow: list[Annotated[str, Field(pattern=_RULE)]] = []
    deny: list[Annotated[str, Field(pattern=_RULE)]] = []
    # a permission prompt unanswered this long is a "No"
    permission_timeout_seconds: float = Field(300, gt=0, le=YEAR)
    # one tool call's limit (Bash takes its own `timeout` up to this)
    tool_seconds: float = Field(600, gt=0, le=DAY)
    # the model's context, in tokens, and the room kept for its answer
    context_tokens: int = Field(180_000, gt=1000, le=10_000_000)
    reserve_tokens: int = Field(16_000, gt=0, le=1_000_000)
    # turns kept word for word when older ones are summarized
    keep_recent_turns: int = Field(6, ge=2, le=1000)
    # drift detection (seed 001 defaults): past any of these the task is stopped and
    # the owner asked whether to continue
    max_iterations: int = Field(50, gt=0, le=100_000)
    max_tool_failures: int = Field(10, gt=0, le=100_000)
    max_minutes_without_progress: float = Field(10, gt=0, le=DAY)
    # after this many failed tool calls in a row, the model is asked one tier up
    # (cheap -> worker -> planner) until a call works again; 0: never
    escalate_after_failures: int = Field(3, ge=0, le=1000)
    # an iteration above this many tokens is logged as a warning
    max_tokens_per_iteration: int = Field(50_000, gt=0, le=10_000_000)
    # learnings kept at a task's end: "keyword" (its marked sentences as said) or
    # "hybrid" (those candidates refined by the cheap tier; kept as said if it fails)
    learnings: Literal["keyword", "hybrid"] = "keyword"
    # subtasks (the Task tool) nest at most this deep
    max_depth: int = Field(3, ge=0, le=20)
    # worktrees of finished tasks: kept for a look after a failure, or removed
    keep_failed_worktrees: bool = True
    policy: LoopPolicyConfig = LoopPolicyConfig()
    anomaly: LoopAnomalyConfig = LoopAnomalyConfig()
