"""A timeline's entries: each kind's words (what `pfar task show` prints), who acted read
back from the journal's text, and the console's macro for each kind, escaped."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jinja2 import Environment, FileSystemLoader, select_autoescape

import pfar.console
from pfar.answers import Actor
from pfar.journal.question_kinds import OtherQuestionKind, QuestionKind
from pfar.kernel.api import timeline_entries as e
from pfar.kernel.api.wire import Wire

AT = "2026-01-02T03:04:05.000006Z"
CLI = Actor("cli", "uid 1000, pid 42")
CONSOLE = Actor("console", "session ab12cd34")

# one of each kind, and what the owner reads for it
WORDS: list[tuple[e.Entry, str]] = [
    (e.Created(at=AT, template_id="note"), "created from note"),
    (
        e.StepStarted(at=AT, step=0, tool="file.write", of=2, what="save the note"),
        "step 1/2 file.write (save the note): started",
    ),
    (
        e.StepEnded(at=AT, step=1, tool="file.read", of=2, status="failed", error="gone"),
        "step 2/2 file.read: failed: gone",
    ),
    (
        e.StepEnded(at=AT, step=2, tool="shell.run", status="completed"),
        "tool call 3 shell.run: completed",
    ),
    (
        e.QuestionAsked(at=AT, approval_id="0123456789", question=QuestionKind.drift),
        "asked owner [01234567] drift",
    ),
    (
        e.QuestionAsked(at=AT, approval_id="0123456789", question=OtherQuestionKind("newer")),
        "asked owner [01234567] newer",
    ),
    (
        e.Answered(at=AT, approval_id="0123456789", status="approved", decision="approve", by=CLI),
        "owner answer [01234567]: approved (approve) via cli (uid 1000, pid 42)",
    ),
    (
        e.Answered(at=AT, approval_id="0123456789", status="denied", decision="deny"),
        "owner answer [01234567]: denied (deny)",
    ),
    (
        e.CredentialAsked(at=AT, prompt_id="fedcba9876", service="github"),
        "asked owner for github credential [fedcba98]",
    ),
    (
        e.CredentialReceived(at=AT, prompt_id="fedcba9876", status="received", by=CONSOLE),
        "credential [fedcba98] received via console (session ab12cd34)",
    ),
    (
        e.Paused(at=AT, paused_from="Executing", by=CONSOLE),
        "paused (from Executing) by console (session ab12cd34)",
    ),
    (e.Paused(at=AT, paused_from="Queued"), "paused (from Queued)"),
    (e.Resumed(at=AT, state="Executing", by=CLI), "resumed (Executing) by cli (uid 1000, pid 42)"),
    (e.Cancelled(at=AT, by=CLI), "cancelled by cli (uid 1000, pid 42)"),
    (e.Cancelled(at=AT), "cancelled"),
    (
        e.MessageToOwner(at=AT, message_kind="result", status="delivered"),
        "message to owner (result, delivered)",
    ),
    (
        e.ModelCall(
            at=AT,
            provider="anthropic",
            model="claude",
            input_tokens=1200,
            output_tokens=80,
            cost_usd=0.0123,
        ),
        "model call anthropic/claude: 1200 tokens in, 80 out, $0.012300",
    ),
    (e.LoopTurn(at=AT, turn="user", text="you: hello"), "you: hello"),
    (
        e.Recovered(at=AT, action="AskOwner", reason="a write was cut off"),
        "recovered at a restart: AskOwner (a write was cut off)",
    ),
    (e.Recovered(at=AT, action="ResumeExecution"), "recovered at a restart: ResumeExecution"),
    (e.Now(at=AT, state="Failed", error="no"), "now Failed: no"),
    (e.Now(at=AT, state="Completed"), "now Completed"),
    (
        e.Retried(at=AT, state="Executing", retry=2, error="the model call failed", by=CLI),
        "retried (retry 2, Executing) by cli (uid 1000, pid 42) after: the model call failed",
    ),
]


def test_every_kind_is_told_in_the_owners_words() -> None:
    assert {type(entry) for entry, _ in WORDS} == set(typing.get_args(e.Entry))
    for entry, words in WORDS:
        assert entry.words == words, entry


def test_the_timeline_reads_back_kind_by_kind() -> None:
    wire: Wire[Any] = Wire(tuple[e.TimelineEntry, ...])
    entries = tuple(entry for entry, _ in WORDS)
    dumped = wire.dump(entries)
    assert [d["kind"] for d in dumped] == [entry.kind for entry in entries]
    assert dumped[6]["by"] == {"surface": "cli", "who": "uid 1000, pid 42"}
    assert wire.parse(dumped, "task_show") == entries


@given(st.text(min_size=1, max_size=12).filter(lambda s: " (" not in s), st.text(max_size=20))
def test_an_actor_reads_back_from_the_text_the_journal_keeps(surface: str, who: str) -> None:
    actor = Actor(surface, who)
    assert Actor.parse(str(actor)) == actor


@pytest.fixture(scope="module")
def pages() -> Environment:
    return Environment(
        loader=FileSystemLoader(Path(pfar.console.__file__).parent / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )


def _shown(pages: Environment, entry: e.Entry) -> str:
    page = pages.from_string('{% import "timeline_entries.html" as t %}{{ t.entry(x) }}')
    return page.render(x=entry)


def test_the_console_shows_every_kind_its_own_way(pages: Environment) -> None:
    for entry, _ in WORDS:
        shown = _shown(pages, entry)
        assert shown.startswith(f'<li class="entry entry-{entry.kind}"><time datetime="{AT}">')
    call = _shown(pages, WORDS[16][0])
    assert '<span class="tokens">1200 tokens in, 80 out</span>' in call
    assert '<span class="cost">$0.012300</span>' in call
    held = _shown(pages, WORDS[10][0])
    assert "by <strong>console</strong> (session ab12cd34)" in held
    ended = e.StepEnded(at=AT, step=0, tool="t", status="completed", result={"out": "ok"})
    assert "<details><summary>result</summary><pre>" in _shown(pages, ended)


def test_the_console_escapes_what_entries_hold(pages: Environment) -> None:
    hostile = "<script>alert(1)</script>"
    for entry in (
        e.Paused(at=AT, paused_from=hostile, by=Actor(hostile, hostile)),
        e.StepEnded(
            at=AT,
            step=0,
            tool=hostile,
            what=hostile,
            status=hostile,
            error=hostile,
            result={"x": hostile},
        ),
        e.LoopTurn(at=AT, turn="user", text=hostile),
        e.ModelCall(
            at=AT, provider=hostile, model=hostile, input_tokens=1, output_tokens=1, cost_usd=0.0
        ),
        e.Now(at=AT, state="Failed", error=hostile),
        e.Retried(at=AT, state=hostile, retry=1, error=hostile, by=Actor(hostile, hostile)),
    ):
        shown = _shown(pages, entry)
        assert "<script>" not in shown, entry
