"""A loop task's learning across a SIGKILL: the kernel dies while the learning is being
extracted (a slow LearningExtracted hook holds it, or at the commits of the decided
learnings and of the kept mark); the next kernel finishes the extraction, and the
learning exists once, with one LearningExtracted event (docs/learnings.md)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..integration.openai_server import OpenAIServer, Stream, text_stream
from ..support import make_home, pfar, read_journal, task_states, wait_for
from .test_regressions import kernel

pytestmark = [pytest.mark.crash, pytest.mark.both_backends]

LESSON = "The bug was in config.rs line 42: the parser expects an array, not an object."


def _home(tmp_path: Path, hook: str | None = None) -> tuple[Home, Path]:
    work = tmp_path / "work"
    work.mkdir()
    script = textwrap.dedent(
        f"""
        [[turns]]
        text = "Found it. {LESSON}"
        """
    )
    config = '[loop]\ntools = ["Read"]\n'
    if hook is not None:
        config += f'[[hooks]]\npoint = "LearningExtracted"\ncommand = {json.dumps(hook)}\n'
        config += "timeout_seconds = 60\n"
    return make_home(tmp_path / "home", script=script, config=config), work


def _learnings(home: Home) -> list[dict[str, object]]:
    listed = pfar(home, "learnings", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    found: list[dict[str, object]] = json.loads(listed.stdout)
    return found


def _extracted(home: Home) -> int:
    events = read_journal(home, lambda s: s.events.bus(0, limit=1_000_000))
    return sum(1 for e in events if e.kind == "LearningExtracted")


def _completed(home: Home) -> bool:
    return list(task_states(home).values()) == ["Completed"]


def _check_kept_once(home: Home) -> None:
    with kernel(home):
        wait_for(lambda: _extracted(home) >= 1, timeout=30, what="LearningExtracted")
        learnings = _learnings(home)
        assert [x["content"] for x in learnings] == [LESSON]
        # a second start looks again and finds it kept: nothing twice
    with kernel(home):
        assert [x["content"] for x in _learnings(home)] == [LESSON]
        assert _extracted(home) == 1


def test_a_kill_during_a_slow_learning_hook_keeps_the_learning_once(tmp_path: Path) -> None:
    started, release = tmp_path / "hook-started", tmp_path / "release"
    # the first time, the hook holds the extraction until the test has killed the kernel
    hook = (
        f"if [ -f {started} ]; then exit 0; fi; touch {started}; "
        f"i=0; while [ ! -f {release} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
    )
    home, work = _home(tmp_path, hook)
    with kernel(home) as k:
        k.request("loop", prompt="Find the bug", directory=str(work), once=True)
        wait_for(started.exists, timeout=30, what="the LearningExtracted hook")
        assert _completed(home)  # the task committed Completed before its extraction
        k.kill()
    release.touch()
    assert _extracted(home) == 0
    _check_kept_once(home)


@pytest.mark.parametrize("fault", ["learnings_decided", "learnings_kept"])
def test_a_kill_at_an_extraction_commit_keeps_the_learning_once(tmp_path: Path, fault: str) -> None:
    home, work = _home(tmp_path)
    with kernel(home, fault=fault) as k:
        k.request("loop", prompt="Find the bug", directory=str(work), once=True)
        assert k.killed_by_fault()
    assert _completed(home)
    _check_kept_once(home)


def test_a_kill_while_the_cheap_tier_refines_keeps_the_learning_once(tmp_path: Path) -> None:
    """Hybrid mode: the kernel dies while the cheap tier's call is in flight; the next
    start asks it again, and keeps what it answered, once."""
    refined = "The parser in config.rs line 42 expects an array, not an object."
    server = OpenAIServer()
    server.script(
        Stream(text_stream(f"Found it. {LESSON}")),  # the task's own answer
        Stream(text_stream(json.dumps([refined])), stall=30),  # the kernel dies meanwhile
        Stream(text_stream(json.dumps([refined]))),
    )
    try:
        work = tmp_path / "work"
        work.mkdir()
        home = make_home(
            tmp_path / "home",
            config=f"""
                [llm]
                provider = "openai"
                model = "gpt-test"
                base_url = "{server.base_url}"
                [loop]
                tools = ["Read"]
                learnings = "hybrid"
            """,
        )
        store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
        store.set("openai_api_key", "sk-local")
        store.close()
        with kernel(home) as k:
            k.request("loop", prompt="Find the bug", directory=str(work), once=True)
            wait_for(lambda: len(server.received) == 2, timeout=30, what="the cheap tier's call")
            assert _completed(home)
            k.kill()
        assert _extracted(home) == 0
        with kernel(home):
            wait_for(lambda: _extracted(home) == 1, timeout=30, what="LearningExtracted")
            assert [x["content"] for x in _learnings(home)] == [refined]
        with kernel(home):
            assert [x["content"] for x in _learnings(home)] == [refined]
            assert _extracted(home) == 1
        assert len(server.received) == 3  # the task's call once, the cheap tier's twice
    finally:
        server.close()
