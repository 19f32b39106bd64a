"""Hooks without a kernel: the points against the seed's list, what each allows, how a
point's handlers combine, and handlers that fail, hang or answer nonsense."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from pfar.config import Config
from pfar.errors import ConfigError
from pfar.hook_points import HookPoint, capabilities
from pfar.hooks import SECURITY, Hooks
from pfar.hooks.handlers import PythonHandler, ShellHandler, resolve
from pfar.hooks.loading import load_handlers
from pfar.hooks.verdicts import HandlerFailed, parse_decision

from .. import hook_handlers

# Seed 001, "Hook Points Overview", as it lists them
SEED_POINTS = {
    "TASK LIFECYCLE HOOKS": [
        "TaskCreated",
        "TaskScheduled",
        "TaskStarted",
        "TaskPaused",
        "TaskResumed",
        "TaskCompleted",
        "TaskFailed",
        "TaskCancelled",
    ],
    "LOOP ITERATION HOOKS": [
        "PreContextAssembly",
        "PostContextAssembly",
        "PreLLMCall",
        "PostLLMCall",
        "PreToolUse",
        "PostToolUse",
        "PreUserPrompt",
        "PostUserInput",
        "LoopIteration",
    ],
    "CROSS-TASK HOOKS": [
        "LearningExtracted",
        "KnowledgeQuery",
        "KnowledgeInjected",
        "ResourceLockWait",
        "ResourceLockAcquired",
        "ResourceLockReleased",
        "SubtaskSpawned",
    ],
    "SECURITY HOOKS": [
        "SecurityPolicyCheck",
        "SecurityViolation",
        "PermissionRequest",
        "PermissionGranted",
        "PermissionDenied",
        "AnomalyDetected",
    ],
}
ALL = [p for group in SEED_POINTS.values() for p in group]


def test_the_points_are_the_seeds() -> None:
    assert [p.value for p in HookPoint] == ALL


def test_the_seeds_capabilities() -> None:
    # the seed: PreContextAssembly injects, modifies and blocks; PreToolUse modifies,
    # injects and blocks; PostToolUse transforms; PermissionRequest auto-approves and
    # denies; the lifecycle only observes
    assert capabilities(HookPoint.PreContextAssembly) >= {"inject", "block"}
    assert capabilities(HookPoint.PreToolUse) == {"observe", "modify", "block", "inject"}
    assert capabilities(HookPoint.PostToolUse) == {"observe", "modify"}
    assert capabilities(HookPoint.PermissionRequest) == {"observe", "block", "allow"}
    assert capabilities(HookPoint.KnowledgeInjected) == {"observe", "modify"}
    for p in SEED_POINTS["TASK LIFECYCLE HOOKS"]:
        assert capabilities(HookPoint(p)) == {"observe"}
    assert set(SECURITY) == {
        HookPoint.SecurityPolicyCheck,
        HookPoint.PermissionRequest,
        HookPoint.PreToolUse,
    }


@pytest.mark.parametrize(
    ("point", "raw", "complaint"),
    [
        (HookPoint.TaskCompleted, {"decision": "block"}, "does not allow"),
        (HookPoint.PreToolUse, {"decision": "allow"}, "does not allow"),
        (HookPoint.PreToolUse, {"modify": {"command": "ls"}}, "only input"),
        (HookPoint.PreToolUse, {"modify": {"input": "ls"}}, "not a JSON object"),
        (HookPoint.PreLLMCall, {"modify": {"max_tokens": True}}, "not a number"),
        (HookPoint.PostToolUse, {"context": "x"}, "does not allow"),
        (HookPoint.PreToolUse, {"decision": "maybe"}, "proceed, block or allow"),
        (HookPoint.PreToolUse, {"verdict": "block"}, "unknown keys verdict"),
        (HookPoint.PreToolUse, ["block"], "not a JSON object"),
        (HookPoint.PreToolUse, {"reason": 3}, "not a string"),
    ],
)
def test_nonsense_is_refused_naming_what_is_wrong(
    point: HookPoint, raw: object, complaint: str
) -> None:
    with pytest.raises(HandlerFailed, match=complaint):
        parse_decision(point, raw)


def test_a_decision_the_point_allows() -> None:
    d = parse_decision(
        HookPoint.PreToolUse, {"modify": {"input": {"command": "ls"}}, "context": "note"}
    )
    assert d.modify == {"input": {"command": "ls"}} and d.context == "note"
    assert parse_decision(HookPoint.TaskFailed, None).decision == "proceed"
    assert parse_decision(HookPoint.TaskFailed, {}).decision == "proceed"


def _py(
    point: HookPoint, name: str, timeout: float = 5, tools: frozenset[str] = frozenset()
) -> PythonHandler:
    target = f"tests.hook_handlers:{name}"
    return PythonHandler(point, target, resolve(target), timeout, tools)


def _sh(point: HookPoint, script: str, timeout: float = 5) -> ShellHandler:
    return ShellHandler(point, script, timeout)


def test_handlers_combine_in_order() -> None:
    hooks = Hooks(
        [
            _py(HookPoint.PreContextAssembly, "inject"),
            _py(HookPoint.PreContextAssembly, "record"),
            _py(HookPoint.PreContextAssembly, "block"),
            _py(HookPoint.PreContextAssembly, "inject"),  # after the block: never asked
        ]
    )
    hook_handlers.FIRED.clear()
    v = asyncio.run(hooks.fire(HookPoint.PreContextAssembly, {"task_id": "t"}))
    assert (
        v.blocked == "blocked by the PreContextAssembly hook tests.hook_handlers:block: not today"
    )
    assert v.context == ("The staging database is read-only today.",)
    assert len(hook_handlers.FIRED) == 3


def test_a_modification_is_what_the_next_handler_sees() -> None:
    hooks = Hooks([_py(HookPoint.PostLLMCall, "upper_text"), _py(HookPoint.PostLLMCall, "record")])
    hook_handlers.FIRED.clear()
    v = asyncio.run(hooks.fire(HookPoint.PostLLMCall, {"text": "hello"}))
    assert v.changes == {"text": "HELLO"}
    assert hook_handlers.FIRED[-1]["text"] == "HELLO"


def test_a_handler_for_some_tools_is_asked_only_about_them() -> None:
    hooks = Hooks([_py(HookPoint.PreToolUse, "block", tools=frozenset({"Bash"}))])
    assert hooks.wants(HookPoint.PreToolUse, "Bash")
    assert not hooks.wants(HookPoint.PreToolUse, "Read")
    v = asyncio.run(hooks.fire(HookPoint.PreToolUse, {"tool": "Read"}))
    assert v.blocked is None


@pytest.mark.parametrize(
    ("handler", "why"),
    [
        ("crash", "raised RuntimeError"),
        ("garbage", "not a JSON object"),
        ("hang", "did not answer within 0.3 s"),
        ("hang_async", "did not answer within 0.3 s"),
    ],
)
def test_a_failing_handler_is_logged_at_an_observe_point_and_blocks_at_a_security_one(
    handler: str, why: str
) -> None:
    seen = Hooks(
        [_py(HookPoint.LoopIteration, handler, 0.3), _py(HookPoint.LoopIteration, "record")]
    )
    hook_handlers.FIRED.clear()
    v = asyncio.run(seen.fire(HookPoint.LoopIteration, {"iteration": 1}))
    assert v.blocked is None and not v.failed_closed
    assert why in v.failed[0]
    assert len(hook_handlers.FIRED) == 2  # the next handler was still asked

    guard = Hooks([_py(HookPoint.PreToolUse, handler, 0.3), _py(HookPoint.PreToolUse, "allow")])
    v = asyncio.run(guard.fire(HookPoint.PreToolUse, {"tool": "Bash"}))
    assert v.failed_closed and v.blocked is not None
    assert why in v.blocked and "failed security hook" in v.blocked


def test_a_shell_handler_gets_the_event_and_answers_on_stdout(tmp_path: Path) -> None:
    seen = tmp_path / "event.json"
    script = f"cat > {seen}; echo '{json.dumps({'modify': {'input': {'command': 'ls -la'}}})}'"
    v = asyncio.run(
        Hooks([_sh(HookPoint.PreToolUse, script)]).fire(
            HookPoint.PreToolUse, {"tool": "Bash", "input": {"command": "ls"}}
        )
    )
    assert v.changes == {"input": {"command": "ls -la"}}
    event = json.loads(seen.read_text())
    assert event == {"hook": "PreToolUse", "tool": "Bash", "input": {"command": "ls"}}


def test_a_shell_handler_blocks_with_status_2_and_its_stderr() -> None:
    v = asyncio.run(
        Hooks([_sh(HookPoint.PreToolUse, "echo 'no force pushes' >&2; exit 2")]).fire(
            HookPoint.PreToolUse, {"tool": "Bash"}
        )
    )
    assert v.blocked is not None and v.blocked.endswith(": no force pushes")
    assert not v.failed_closed


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("echo 'I think it is fine'", "not JSON"),
        ("exit 3", "exited with status 3"),
        ("echo oops >&2; exit 1", "exited with status 1: oops"),
        ("sleep 30", "did not answer within 0.5 s"),
        ('echo \'{"decision": "block", "why": 1}\'', "unknown keys why"),
    ],
)
def test_a_shell_handler_that_fails_hangs_or_prints_garbage(script: str, why: str) -> None:
    v = asyncio.run(
        Hooks([_sh(HookPoint.PostToolUse, script, 0.5)]).fire(HookPoint.PostToolUse, {})
    )
    assert v.blocked is None and why in v.failed[0]
    v = asyncio.run(
        Hooks([_sh(HookPoint.PermissionRequest, script, 0.5)]).fire(HookPoint.PermissionRequest, {})
    )
    assert v.failed_closed and v.blocked is not None and why in v.blocked


def test_a_hanging_shell_handler_is_killed_with_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    asyncio.run(Hooks([_sh(HookPoint.TaskFailed, script, 0.5)]).fire(HookPoint.TaskFailed, {}))
    pid = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        asyncio.run(asyncio.sleep(0.05))
    else:
        pytest.fail(f"the handler's child {pid} still runs")


def _config(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text)
    path.chmod(0o600)
    return Config.load(path)


@pytest.mark.parametrize(
    ("entry", "key", "complaint"),
    [
        ('point = "BeforeTool"\ncommand = "true"', "hooks.0", "is no hook point"),
        ('point = "PreToolUse"', "hooks.0", "exactly one of command or python"),
        (
            'point = "PreToolUse"\ncommand = "true"\npython = "a:b"',
            "hooks.0",
            "exactly one of command or python",
        ),
        ('point = "TaskFailed"\ncommand = "true"\ntools = ["Bash"]', "hooks.0", "only for a tool"),
        (
            'point = "TaskFailed"\ncommand = "true"\ntimeout_seconds = 0',
            "hooks.0.timeout_seconds",
            "",
        ),
        ('point = "TaskFailed"\ncommand = "true"\nmatcher = "x"', "hooks.0.matcher", "unknown key"),
    ],
)
def test_a_bad_hook_entry_is_refused_naming_its_key(
    tmp_path: Path, entry: str, key: str, complaint: str
) -> None:
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, f"[[hooks]]\n{entry}\n")
    assert err.value.key == key and complaint in err.value.problem


def test_a_python_handler_that_cannot_be_imported_stops_the_start(tmp_path: Path) -> None:
    config = _config(tmp_path, '[[hooks]]\npoint = "TaskFailed"\npython = "no_such_module:f"\n')
    with pytest.raises(ConfigError) as err:
        load_handlers(config.hooks, tmp_path / "config.toml", tmp_path / "hooks", tmp_path)
    assert err.value.key == "hooks.0.python" and "no_such_module" in err.value.problem


def test_the_hooks_directory(tmp_path: Path) -> None:
    hooks_dir = tmp_path / "hooks"
    (hooks_dir / "PreToolUse").mkdir(parents=True)
    script = hooks_dir / "PreToolUse" / "10-no-rm.sh"
    script.write_text("#!/bin/sh\ngrep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; }\nexit 0\n")
    script.chmod(0o700)
    (hooks_dir / "PreToolUse" / ".hidden").write_text("ignored")
    found = load_handlers([], tmp_path / "config.toml", hooks_dir, tmp_path)
    assert [(h.point, h.name) for h in found] == [
        (HookPoint.PreToolUse, "hooks/PreToolUse/10-no-rm.sh")
    ]
    hooks = Hooks(found)
    v = asyncio.run(hooks.fire(HookPoint.PreToolUse, {"input": {"command": "rm -rf /"}}))
    assert v.blocked is not None and "no rm -rf" in v.blocked
    assert (
        asyncio.run(hooks.fire(HookPoint.PreToolUse, {"input": {"command": "ls"}})).blocked is None
    )

    script.chmod(0o600)
    with pytest.raises(ConfigError, match="not executable"):
        load_handlers([], tmp_path / "config.toml", hooks_dir, tmp_path)
    script.chmod(0o720)
    with pytest.raises(ConfigError, match="group-writable"):
        load_handlers([], tmp_path / "config.toml", hooks_dir, tmp_path)
    script.chmod(0o700)
    (hooks_dir / "BeforeTool").mkdir()
    with pytest.raises(ConfigError, match="is no hook point"):
        load_handlers([], tmp_path / "config.toml", hooks_dir, tmp_path)


def test_an_entry_point_handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an installed distribution (its metadata on sys.path) naming a handler in pfar.hooks
    dist = tmp_path / "site" / "owner_hooks-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: owner-hooks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            """
            [pfar.hooks]
            PostToolUse.audit = tests.hook_handlers:record
            """
        )
    )
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), *sys.path])
    found = load_handlers([], tmp_path / "config.toml", tmp_path / "hooks", tmp_path)
    assert [(h.point, h.name) for h in found] == [
        (HookPoint.PostToolUse, "tests.hook_handlers:record")
    ]
