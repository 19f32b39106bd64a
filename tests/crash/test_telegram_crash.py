"""R6: the Telegram channel resumes from its last offset after a SIGKILL; no update is
lost and none is processed twice, whichever commit the kill came after (a task an
update created, the batch's offset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..integration.telegram_server import OWNER, TOKEN, BotApi, Sent, unescape
from ..support import (
    KernelProcess,
    loop_turns,
    make_home,
    read_journal,
    tasks_in_order,
    wait_for,
)
from .channel_support import delivery_counts, prompts, sent_remote_ids, settled
from .test_regressions import kernel

pytestmark = pytest.mark.crash


def _home(
    tmp_path: Path, api: BotApi, *, tools: str = '["file.read"]', script: str | None = None
) -> Home:
    work = tmp_path / "work"
    work.mkdir()
    config = f"""
[recovery]
adapter_retry_backoff_seconds = 0.1
[channels]
directory = "{work}"
[channels.telegram]
owner_user_id = {OWNER}
api_url = "{api.url}"
poll_timeout_seconds = 1
[loop]
tools = {tools}
"""
    script = script or '[[turns]]\ntext = "noted: $input"\n'
    home = make_home(tmp_path / "home", config=config, script=script)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("telegram_bot_token", TOKEN)
    store.close()
    return home


def _offset(home: Home) -> int | None:
    found = read_journal(home, lambda s: s.adapters.get("telegram"))
    offset = found.get("last_offset") if found else None
    return offset if isinstance(offset, int) else None


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["task_created:2", "adapter_position"])
def test_r6_telegram_resumes_from_its_last_offset_after_a_kill(tmp_path: Path, point: str) -> None:
    api = BotApi()
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:
            # a new bot skips what waited before its first look: the owner writes after
            wait_for(
                lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
                what="the channel polling",
            )
            first = api.say("message one")
            wait_for(lambda: _offset(home) == first, what="the first batch's offset")
            k.kill()
        # while the kernel is down, the owner goes on writing
        ids = [api.say(f"message {n}") for n in ("two", "three", "four")]
        calls_before = len(api.calls)
        with kernel(home, fault=point) as k:
            assert k.killed_by_fault(), k.output()
        with kernel(home) as k:
            wait_for(lambda: _offset(home) == ids[-1], what="the last offset")
            wait_for(lambda: len(prompts(home)) == 4, what="four tasks")
            k.request("wait_idle")
            # the replies are in the outbox, sent in turn
            wait_for(lambda: settled(home), what="every delivery settled")
        polls = [p for m, p in api.calls[calls_before:] if m == "getUpdates"]
        # every start polled from the offset it had saved: never -1 (a gap) again
        assert all(int(p["offset"]) > first for p in polls), polls
        assert prompts(home) == [
            "message one",
            "message two",
            "message three",
            "message four",
        ]  # each update once: none lost, none twice
        started = [unescape(s.text) for s in api.sent if s.reply_to is not None]
        assert len([t for t in started if "started" in t]) >= 3
    finally:
        api.close()


@pytest.mark.both_backends
@pytest.mark.parametrize("point", ["channel_sending", "channel_sent"])
def test_a_message_to_the_owner_is_never_sent_twice(tmp_path: Path, point: str) -> None:
    api = BotApi()
    try:
        home = _home(tmp_path, api)
        # killed at its first delivery, which may come before it answers on its socket
        assert KernelProcess(home, fault=point).killed_by_fault()
        before = len(api.sent)
        assert before == (1 if point == "channel_sent" else 0)
        with kernel(home) as k:
            wait_for(lambda: len(api.sent) > before, what="the second start's report")
            k.request("wait_idle")
            wait_for(lambda: settled(home), what="every delivery settled")
        counts = delivery_counts(home)
        sent = sent_remote_ids(home, "telegram")
        assert sent == sorted(str(s.message_id) for s in api.sent), counts  # each once
        assert counts.get("in_doubt", 0) == (1 if point == "channel_sending" else 0), counts
    finally:
        api.close()


WRITE_SCRIPT = """
[[turns]]
turn = 1
text = "Writing."
tool_calls = [{ name = "file.write", input = { path = "a.txt", content = "one" } }]

[[turns]]
text = "Done: $last"
"""


@pytest.mark.both_backends
def test_a_question_resent_after_a_restart_replaces_the_old_buttons_and_is_answered_once(
    tmp_path: Path,
) -> None:
    """Killed before the answer and after it: the old prompt loses its buttons, the new
    one is answered once, and after the second kill nothing is asked or written again."""
    api = BotApi()
    try:
        home = _home(tmp_path, api, tools='["file.write"]', script=WRITE_SCRIPT)
        target = tmp_path / "work" / "a.txt"

        def prompts() -> list[Sent]:
            return [s for s in api.sent if s.reply_markup]

        with kernel(home) as k:
            wait_for(lambda: api.sent, what="the start report")
            api.say("write a.txt")
            wait_for(lambda: len(prompts()) == 1, what="the permission prompt")
            # its delivery committed as sent (with its message id): a kill before that
            # leaves it in doubt, and the re-sent question cannot know which to replace
            wait_for(
                lambda: {status for status, n in delivery_counts(home).items() if n} == {"sent"},
                what="the prompt's delivery committed",
            )
            k.kill()  # before the answer
        old = prompts()[0]
        with kernel(home) as k:
            wait_for(lambda: len(prompts()) == 2, what="the question asked again")
            new = prompts()[1]
            assert new.message_id != old.message_id
            wait_for(
                lambda: any(str(e.get("message_id")) == str(old.message_id) for e in api.edited),
                what="the old prompt's buttons taken off",
            )
            yes = new.reply_markup["inline_keyboard"][0][0]["callback_data"]  # type: ignore[index]
            api.press(new, yes)
            wait_for(target.exists, what="the write the answer allowed")
            wait_for(lambda: api.answered, what="the press answered")
            k.kill()  # after the answer
        with kernel(home) as k:
            k.request("wait_idle")
            api.press(new, yes)  # the same button again, after both kills
            # (the first press may come again too, if the kill beat its batch's offset)
            wait_for(lambda: len(api.answered) >= 2, what="the second press answered")
        assert api.answered[0]["text"] == "approve: done"
        assert all(a["text"].startswith("already answered") for a in api.answered[1:])
        assert len(prompts()) == 2  # never asked a third time
        assert target.read_text() == "one"
    finally:
        api.close()


def _owner_words(home: Home) -> list[str]:
    tasks = sorted(t.task_id for t in tasks_in_order(home))
    turns = [turn for tid in tasks for turn in loop_turns(home, tid)]
    return [t.get("text", "") for t in turns if t["kind"] == "user"]


def _polling(api: BotApi) -> None:
    wait_for(
        lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
        what="the channel polling",
    )


@pytest.mark.both_backends
def test_a_reply_to_a_loop_task_is_one_turn_across_a_kill_after_it(tmp_path: Path) -> None:
    api = BotApi()
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:
            _polling(api)
            api.say("hello")
            answer: Sent = wait_for(
                lambda: next((s for s in api.sent if "noted: hello" in unescape(s.text)), None),
                what="the task's answer",
            )
            wait_for(lambda: settled(home), what="the answer's delivery committed")
            k.kill()
        calls = len(api.calls)
        with kernel(home, fault="user_input") as k:
            wait_for(lambda: len(api.calls) > calls, what="the channel polling again")
            api.say("and more", reply_to=answer.message_id)
            assert k.killed_by_fault(), k.output()
        with kernel(home) as k:
            wait_for(
                lambda: len([s for s in api.sent if "noted: " in unescape(s.text)]) == 2,
                what="the answer to the reply",
            )
            k.request("wait_idle")
        assert _owner_words(home) == ["hello", "and more"]  # the reply once
        assert len(prompts(home)) == 1  # and no new task from it
    finally:
        api.close()


@pytest.mark.both_backends
def test_a_button_press_is_spent_once_across_a_kill_after_its_answer(tmp_path: Path) -> None:
    api = BotApi()
    try:
        home = _home(tmp_path, api, tools='["file.write"]', script=WRITE_SCRIPT)
        target = tmp_path / "work" / "a.txt"
        with kernel(home) as k:
            _polling(api)
            api.say("write a.txt")
            prompt: Sent = wait_for(
                lambda: next((s for s in api.sent if s.reply_markup), None), what="the prompt"
            )
            wait_for(lambda: settled(home), what="the prompt's delivery committed")
            k.kill()  # before the answer
        yes = prompt.reply_markup["inline_keyboard"][0][0]["callback_data"]  # type: ignore[index]
        with kernel(home, fault="approval_decided") as k:
            fresh: Sent = wait_for(
                lambda: next((s for s in api.sent[1:] if s.reply_markup and s != prompt), None),
                what="the question asked again",
            )
            fresh_yes = fresh.reply_markup["inline_keyboard"][0][0]["callback_data"]  # type: ignore[index]
            api.press(fresh, fresh_yes)
            assert k.killed_by_fault(), k.output()  # after the answer
        with kernel(home) as k:
            wait_for(target.exists, what="the write the answer allowed")
            k.request("wait_idle")
            api.press(prompt, yes)  # the first prompt's button, after both kills
            wait_for(
                lambda: any(a["text"].startswith("already answered") for a in api.answered),
                what="the old button's answer",
            )
        assert target.read_text() == "one"
        assert len([s for s in api.sent if s.reply_markup]) == 2  # never asked a third time
    finally:
        api.close()
