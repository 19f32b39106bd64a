"""The guards a config turns off, named at every start (issue 22): a config that lets
every tool run without a question, refuses no command, protects no path and checks
nothing unusual must not start as quietly as the defaults do. Each guard that is off is
one warning in the log and one `guard_off` audit entry; nothing is refused for it."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Config

# tools that only read inside the task's directory (Skill: the skills the task was given,
# confined to their folders): always allowing them is the default
_READS = frozenset({"Read", "Glob", "Grep", "Skill", "file.read"})
_COMMANDS = frozenset({"Bash", "shell.run"})


@dataclass(frozen=True, slots=True)
class GuardOff:
    guard: str  # the config key that turned it off
    detail: str  # what no longer happens, in words


def guards_off(config: Config) -> list[GuardOff]:
    loop, policy, anomaly = config.loop, config.loop.policy, config.loop.anomaly
    # a bare `Tool` in [loop] allow is as good as always_allow
    unasked = {t for t in loop.tools if t in loop.always_allow or t in loop.allow}
    found: list[GuardOff] = []
    writers = sorted(unasked - _READS)
    if writers:
        found.append(
            GuardOff(
                "loop.always_allow",
                f"{', '.join(writers)} {_run(writers)} without asking the owner "
                "([loop] always_allow or allow): no permission prompt for them",
            )
        )
    if not policy.builtin_dangerous_commands:
        found.append(
            GuardOff(
                "loop.policy.builtin_dangerous_commands",
                "the built-in dangerous-command checks are off"
                + (
                    " and dangerous_commands is empty: no command is refused"
                    if not policy.dangerous_commands
                    else f" (only the {len(policy.dangerous_commands)} dangerous_commands "
                    "patterns apply)"
                ),
            )
        )
    if not policy.protected_paths:
        found.append(
            GuardOff(
                "loop.policy.protected_paths",
                "protected_paths is empty: no path is kept from the loop's tools",
            )
        )
    if not policy.tainted_writes:
        found.append(
            GuardOff(
                "loop.policy.tainted_writes",
                "standing answers let writes run right after outside data (a fetched page)",
            )
        )
    if anomaly.max_writes_per_minute == 0:
        found.append(
            GuardOff("loop.anomaly.max_writes_per_minute", "a burst of writes is not flagged")
        )
    if not anomaly.new_hosts:
        found.append(
            GuardOff("loop.anomaly.new_hosts", "a host no task reached before is not flagged")
        )
    commands = sorted(unasked & _COMMANDS)
    if commands and not config.sandbox.enabled:
        found.append(
            GuardOff(
                "sandbox.enabled",
                f"{', '.join(commands)} {_run(commands)} without a question and without a sandbox: "
                "a command can read and write whatever the kernel's user can",
            )
        )
    found += _mcp_unasked(config)
    return found


def _mcp_unasked(config: Config) -> list[GuardOff]:
    """An MCP tool the owner let run without a question (`ask = false`) that may write."""
    found = []
    for i, server in enumerate(config.mcp.servers):
        for name, tool in server.tools.items():
            if server.enabled and tool.ask is False and tool.semantics != "read":
                found.append(
                    GuardOff(
                        f"mcp.servers.{i}.tools.{name}.ask",
                        f"mcp__{server.name}__{name} runs without asking the owner, and it "
                        'may write (its semantics is not "read")',
                    )
                )
    return found


def _run(tools: list[str]) -> str:
    return "runs" if len(tools) == 1 else "run"
