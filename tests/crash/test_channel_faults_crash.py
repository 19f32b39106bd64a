"""Chat channels under ordinary faults, across a SIGKILL: a new bot killed before the
owner's first message still gets every message sent while it was down; a message the
server stored before the connection broke reaches the owner once; `pfar channels` shows
a send that waits for its retry."""

from __future__ import annotations

from pathlib import Path

import pytest

from pfar.vault.home import Home

from ..integration.telegram_server import BotApi, unescape
from ..support import owner_messages, pfar, read_journal, task_states, wait_for
from .channel_support import delivery_counts, prompts, settled
from .test_regressions import kernel
from .test_telegram_crash import _home, _offset

pytestmark = pytest.mark.crash


@pytest.mark.both_backends
def test_a_new_bot_killed_before_the_first_message_loses_none_sent_meanwhile(
    tmp_path: Path,
) -> None:
    api = BotApi()
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:
            # first connection, nothing waits: polling from here on (the position it
            # polls from is committed before the first long poll)
            wait_for(
                lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
                what="the channel polling",
            )
            k.kill()
        ids = [api.say(f"message {n}") for n in ("one", "two", "three")]
        calls_before = len(api.calls)
        with kernel(home) as k:
            wait_for(lambda: _offset(home) == ids[-1], what="the last offset")
            wait_for(lambda: len(prompts(home)) == 3, what="three tasks")
            k.request("wait_idle")
        polls = [p for m, p in api.calls[calls_before:] if m == "getUpdates"]
        assert all(int(p["offset"]) >= 0 for p in polls), polls  # never -1 again
        assert prompts(home) == ["message one", "message two", "message three"]
    finally:
        api.close()


def _first_report(home: Home) -> tuple[str, str]:
    """The first message queued (the first start's report): its key and its text. The
    owner log holds every queued message, in the order they were queued."""
    first = wait_for(lambda: owner_messages(home)[:1], what="the first message logged")[0]
    return first["key"], first["body"]


def _in_doubt(home: Home, key: str) -> bool:
    """The delivery of `key` on Telegram is in doubt: the notice naming it is queued in
    the commit that marks it so."""
    return read_journal(home, lambda s: s.adapters.queued(f"in-doubt:telegram:{key}"))


def _sent(home: Home, key: str) -> bool:
    return bool(read_journal(home, lambda s: s.adapters.sent_ids("telegram", key)))


@pytest.mark.both_backends
def test_a_message_stored_before_the_connection_broke_reaches_the_owner_once(
    tmp_path: Path,
) -> None:
    """The server stores the start report and the connection breaks before its answer:
    pfar cannot know it arrived, so it never sends it again (not after a SIGKILL and a
    restart either) and says once that a message may be missing, naming it."""
    api = BotApi()
    api.cut_next("sendMessage", after_handling=True)
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:
            wait_for(lambda: api.sent, what="the report stored by the server")
            key, text = _first_report(home)
            wait_for(lambda: _in_doubt(home, key) or _sent(home, key), what="its outcome")
            # killed once nothing else is on its way: a message caught mid-send by the
            # kill is in doubt too, rightly, and would be a second one
            wait_for(lambda: settled(home), what="every delivery settled")
            k.kill()
        with kernel(home) as k:
            wait_for(lambda: len(owner_messages(home)) >= 3, what="a report")
            k.request("wait_idle")
            # the notice is queued when the channel starts again, after the report: wait
            # for it to be sent, not only for what was queued before it to settle
            wait_for(
                lambda: any("may not have arrived" in unescape(s.text) for s in api.sent),
                what="the notice that a message may not have arrived",
            )
            wait_for(lambda: settled(home), what="every delivery settled")
        texts = [unescape(s.text) for s in api.sent]
        # each report with this text (the second start's may say the same) once
        queued = [m for m in owner_messages(home) if m["body"] == text]
        assert texts.count(text) == len(queued), texts
        notices = [t for t in texts if "may not have arrived" in t]
        assert len(notices) == 1 and text[:40] in notices[0], texts  # told once, named
        assert _in_doubt(home, key) and not _sent(home, key)
        assert delivery_counts(home).get("in_doubt") == 1, delivery_counts(home)
    finally:
        api.close()


@pytest.mark.both_backends
def test_pfar_channels_shows_a_send_waiting_for_its_retry(tmp_path: Path) -> None:
    api = BotApi()
    api.fail_next("sendMessage", 502, "Bad Gateway")
    try:
        home = _home(tmp_path, api)
        home.config.write_text(
            home.config.read_text().replace(
                "adapter_retry_backoff_seconds = 0.1", "adapter_retry_backoff_seconds = 60"
            )
        )
        with kernel(home) as k:
            wait_for(lambda: api.refusals, what="the 502")

            def shown() -> str | None:
                out = pfar(home, "channels").stdout
                return out if "next try" in out else None

            out = wait_for(shown, what="`pfar channels` showing the retry")
            assert "1 pending" in out and "Bad Gateway" in out and "connected" in out, out
            assert not api.sent  # held until its retry
            k.kill()
    finally:
        api.close()


SLOW_SCRIPT = """
[[turns]]
text = "slow answer: $input"
delay_seconds = 2
"""


@pytest.mark.both_backends
def test_a_result_that_comes_during_the_shutdown_wait_reaches_the_chat(tmp_path: Path) -> None:
    """SIGTERM while a task still runs: the kernel waits for it, and its answer goes out
    on the channel before the channel stops (not at the next start)."""
    api = BotApi()
    try:
        home = _home(tmp_path, api, script=SLOW_SCRIPT)
        with kernel(home) as k:
            wait_for(
                lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
                what="the channel polling",
            )
            api.say("hello")
            wait_for(lambda: prompts(home) == ["hello"], what="the task")
            assert k.terminate() == 0, k.output()
        texts = [unescape(s.text) for s in api.sent]
        assert any("slow answer: hello" in t for t in texts), texts
    finally:
        api.close()


@pytest.mark.both_backends
def test_a_kill_right_after_a_messages_commit_still_answers_it(tmp_path: Path) -> None:
    """The task the owner's message created is committed, and the kernel dies before its
    answer is queued: delivered again after the restart, the message makes no second
    task, and the owner gets one answer to it, naming the task."""
    api = BotApi()
    try:
        home = _home(tmp_path, api)
        with kernel(home) as k:  # the bot's first connection: its position is saved
            wait_for(
                lambda: any(m == "getUpdates" and int(p["offset"]) >= 0 for m, p in api.calls),
                what="the channel polling",
            )
            k.kill()
        api.say("hello")
        with kernel(home, fault="task_created") as k:
            assert k.killed_by_fault(), k.output()
        assert not [s for s in api.sent if s.reply_to]  # no answer went out
        with kernel(home) as k:
            k.request("wait_idle")
            wait_for(lambda: [s for s in api.sent if s.reply_to], what="the answer")
            wait_for(lambda: settled(home), what="every delivery settled")
        (task,) = task_states(home)
        (answer,) = [unescape(s.text) for s in api.sent if s.reply_to]
        assert task[:8] in answer, answer
        assert prompts(home) == ["hello"]
    finally:
        api.close()
