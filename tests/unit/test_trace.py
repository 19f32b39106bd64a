"""trace.md (seed 003): format, round trips, hand edits, errors, the recovery check, the file."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pfar.errors import PfarError
from pfar.runners.workflow import (
    Artifact,
    ExtraField,
    OwnerOption,
    RawSection,
    ResumeEntry,
    Section,
    StepMismatch,
    StepStatus,
    Trace,
    TraceFormatError,
    TraceState,
    TraceStep,
    WorkflowStatus,
    append_resume,
    classify,
    complete_step,
    complete_workflow,
    decide,
    fail_step,
    new_trace,
    parse_trace,
    read_trace,
    reconstruct_context,
    render_trace,
    resume_entry,
    start_step,
    update_step,
    update_trace,
    verify_artifacts,
    write_trace_atomic,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "traces"
CANONICAL = ["between_steps.md", "mid_step.md", "failed.md", "completed.md"]
ALL = [*CANONICAL, "hand_edited.md"]


def fixture(name: str) -> Trace:
    return read_trace(FIXTURES / name)


def touch(base: Path, *paths: str) -> None:
    for path in paths:
        (base / path).parent.mkdir(parents=True, exist_ok=True)
        (base / path).write_text("x\n", encoding="utf-8")


# -- the fixtures ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_every_fixture_parses_and_round_trips(name: str) -> None:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    trace = parse_trace(text, name)
    rendered = render_trace(trace)
    assert parse_trace(rendered, name) == trace
    assert render_trace(parse_trace(rendered, name)) == rendered  # the canonical form is stable
    if name in CANONICAL:
        assert rendered == text  # the fixtures are written in the canonical form


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("between_steps.md", TraceState.between_steps),
        ("mid_step.md", TraceState.mid_step),
        ("failed.md", TraceState.failed),
        ("completed.md", TraceState.completed),
        ("hand_edited.md", TraceState.mid_step),
    ],
)
def test_classify_each_fixture(name: str, state: TraceState) -> None:
    assert classify(fixture(name)) is state


def test_fixtures_keep_the_seed_step_texts() -> None:
    step3 = fixture("mid_step.md").steps[2]
    assert step3 == TraceStep(
        number=3,
        name="implement",
        status=StepStatus.in_progress,
        summary="Implementing auth endpoint.",
        artifacts=(Artifact("Created src/auth/login.py"), Artifact("modified src/api/routes.py")),
        key_decisions="Using JWT with 24h expiry, refresh tokens stored in DB",
        current_focus=(
            "Token validation logic. Completed: user model, routes. Remaining: validation, tests."
        ),
    )
    assert [a.path for a in step3.artifacts] == ["src/auth/login.py", "src/api/routes.py"]
    failed = fixture("failed.md")
    assert failed.steps[3].challenges == "Auth endpoint returns 401 for valid tokens."
    assert failed.resumes == (
        ResumeEntry(
            step=3,
            step_name="implement",
            prior_completed=2,
            resumed="2025-03-02T14:02:00Z — session 2",
            context_from="tasks/auth_feature/tracking.md, key decisions of Step 1",
        ),
    )
    assert [type(s).__name__ for s in failed.sections] == [
        "TraceStep",
        "TraceStep",
        "ResumeEntry",
        "TraceStep",
        "TraceStep",
    ]
    header = fixture("between_steps.md")
    assert (header.title, header.workflow, header.status) == (
        "Trace: auth_feature",
        "auth_feature",
        WorkflowStatus.in_progress,
    )
    assert header.task_spec == "tasks/auth_feature/tracking.md"


# -- hand edits --------------------------------------------------------------------------------


def without_unknowns(trace: Trace) -> Trace:
    sections: list[Section] = [
        dataclasses.replace(s, extra=()) if isinstance(s, TraceStep) else s
        for s in trace.sections
        if not isinstance(s, RawSection)
    ]
    return dataclasses.replace(trace, extra=(), sections=tuple(sections))


def test_hand_edits_read_as_the_same_trace() -> None:
    # reordered fields, blank lines, lower-case names, `**Status**:`, "In Progress", bullets
    assert without_unknowns(fixture("hand_edited.md")) == fixture("mid_step.md")


def test_unknown_parts_are_kept_in_place_on_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "trace.md"
    path.write_bytes((FIXTURES / "hand_edited.md").read_bytes())
    update_trace(path, lambda t: complete_step(t, 3, summary="Implemented auth endpoint."))
    text = path.read_text(encoding="utf-8")
    assert "**Workflow:** auth_feature\n**Owner:** dana\n**Status:** in-progress" in text
    notes = (
        "## Notes\n\nTalked to Sam: the token lifetime may change to 12h.\n"
        "**Not a field here:** unknown sections are kept as written.\n\n---\n\n## Step 1: orient"
    )
    assert notes in text
    reviewer = (
        "**Status:** completed\n**Reviewer:** sam,\nasked to look at the refresh-token table\n"
    )
    assert reviewer in text
    trace = read_trace(path)
    assert trace.steps[2].status is StepStatus.completed
    assert trace.extra == (ExtraField("Owner", "dana", "workflow"),)
    assert trace.sections[0] == RawSection(
        "Notes",
        "Talked to Sam: the token lifetime may change to 12h.\n"
        "**Not a field here:** unknown sections are kept as written.",
    )


_FIELD_LINE = re.compile(r"\*\*([^*:]+):\*\*(.*)$")


def _hand_edit(text: str, data: st.DataObject) -> str:
    """Edits a person makes without changing meaning: field order, case, blanks, CRLF."""
    chunks = []
    for chunk in re.split(r"(?m)^(?=## )", text):
        lines = chunk.rstrip("\n").split("\n")
        head, body = (lines[:1], lines[1:]) if chunk.startswith("#") else ([], lines)
        groups: list[list[str]] = []
        for line in body:  # a field with its continuation lines (bullets, blanks, ---)
            if line.startswith("**") or not groups:
                groups.append([line])
            else:
                groups[-1].append(line)
        edited = head + [""] * data.draw(st.integers(0, 2))
        for group in data.draw(st.permutations(groups)):
            for line in group:
                if (m := _FIELD_LINE.match(line)) is not None:
                    label = data.draw(st.sampled_from([m[1], m[1].lower(), m[1].upper()]))
                    value = m[2]
                    if label.casefold() == "status":
                        styles = [value.upper(), f"`{value.strip()}`", value.replace("-", " ")]
                        value = data.draw(st.sampled_from([value, *styles]))
                    line = f"**{label}{data.draw(st.sampled_from([':**', '**:']))}{value}"
                edited.append(line + data.draw(st.sampled_from(["", "  ", "\t"])))
                edited += [""] * data.draw(st.integers(0, 2))
        chunks.append("\n".join(edited))
    edited_text = "\n".join(chunks) + "\n"
    return edited_text.replace("\n", "\r\n") if data.draw(st.booleans()) else edited_text


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(CANONICAL), data=st.data())
def test_hand_edited_variants_read_as_the_same_trace(name: str, data: st.DataObject) -> None:
    original = parse_trace((FIXTURES / name).read_text(encoding="utf-8"), name)
    edited = parse_trace(_hand_edit((FIXTURES / name).read_text(encoding="utf-8"), data), name)
    assert edited == original
    assert parse_trace(render_trace(edited), name) == edited


def test_multi_line_values_and_their_escapes() -> None:
    text = (
        "# Trace: w\n\nPreamble written by hand.\n**Status:** in-progress\n\n"
        "## Step 1: a\n**Status:** in-progress\n**Summary:**\nfirst line\n\n  second, indented\n"
        "\\## not a heading\n\\---\n\\**Owner:** not a field\n\\\\starts with a backslash\n"
        "**Current focus:** one\n  two\n"
    )
    trace = parse_trace(text, "trace.md")
    assert trace.steps[0].summary == (
        "first line\n\n  second, indented\n## not a heading\n---\n**Owner:** not a field\n"
        "\\starts with a backslash"
    )
    assert trace.steps[0].current_focus == "one\n  two"
    assert trace.extra == (ExtraField("", "Preamble written by hand.", ""),)
    assert parse_trace(render_trace(trace), "trace.md") == trace


@pytest.mark.parametrize(
    ("value", "texts"),
    [
        ("Created a.py, modified b/c.py", ["Created a.py", "modified b/c.py"]),
        (
            "\n- Created a.py, the first\n* b.py\n+ c.py",
            ["Created a.py, the first", "b.py", "c.py"],
        ),
        ("a.py\n- b, c", ["a.py", "b, c"]),
    ],
)
def test_artifacts_as_a_list_or_bullets(value: str, texts: list[str]) -> None:
    trace = parse_trace(
        f"**Status:** in-progress\n## Step 1: x\n**Status:** pending\n**Artifacts:** {value}\n", "t"
    )
    assert [a.text for a in trace.steps[0].artifacts] == texts
    assert parse_trace(render_trace(trace), "t") == trace


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("Created src/auth/login.py", "src/auth/login.py"),
        ("modified `src/api/routes.py`.", "src/api/routes.py"),
        ("Updated README.md (auth section, token lifetimes)", "README.md"),
        ("wrote ./out/ and .env", ".env"),
        ("Bumped to v1.2", None),
        ("see https://example.com/x", None),
        ("Nothing yet", None),
    ],
)
def test_artifact_path_is_the_last_pathlike_token(text: str, path: str | None) -> None:
    assert Artifact(text).path == path


# -- errors ------------------------------------------------------------------------------------


def test_bad_status_names_line_and_allowed_values() -> None:
    text = "# Trace: w\n**Status:** in-progress\n\n## Step 1: a\n**Status:** done\n"
    with pytest.raises(TraceFormatError) as err:
        parse_trace(text, "trace.md")
    assert str(err.value) == (
        "trace.md:5: expected **Status:** to be one of pending, in-progress, completed, failed; "
        "got 'done'"
    )
    assert (err.value.line, err.value.got) == (5, "done")
    assert isinstance(err.value, PfarError)


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("**Status:** finished\n", 1, "in-progress, completed; got 'finished'"),
        ("# T\n**Status:** in-progress\n## Step three: a\n", 3, "'## Step N: <name>' (N a number)"),
        ("**Status:** in-progress\n## Step: a\n**Status:** pending\n", 2, "'## Step N: <name>'"),
        ("**Status:** in-progress\n## Step 1:\n**Status:** pending\n", 2, "'## Step N: <name>'"),
        ("# T\n**Summary:** oops\n**Status:** in-progress\n", 2, "'## Step N: <name>' heading"),
        ("# T\n**Workflow:** w\n\n## Step 1: a\n", 4, "a **Status:** field (in-progress"),
        ("**Status:** in-progress\n## Step 1: a\n**Summary:** x\n", 2, "**Status:** field in Step"),
        ("**Status:** in-progress\n## Step 2: a\n**Status:** pending\n", 2, "'## Step 1: <name>'"),
        (
            "**Status:** in-progress\n## Step 1: a\n**Status:** pending\n**status:** completed\n",
            4,
            "one **Status:** in Step 1",
        ),
        ("**Status:** in-progress\n# Late title\n", 2, "one '# ' title, above the fields"),
        (
            "**Status:** in-progress\n## Resume\n**Resuming from:** the start\n"
            "**Prior steps completed:** 0\n",
            3,
            "**Resuming from:** to read 'Step N — <name>'",
        ),
        (
            "**Status:** in-progress\n## Resume\n**Resuming from:** Step 2\n"
            "**Prior steps completed:** two\n",
            4,
            "**Prior steps completed:** to be a whole number",
        ),
        ("**Status:** in-progress\n## Resume\n**Resumed:** now\n", 2, "**Resuming from:** field"),
        ("", 1, "a **Status:** field"),
    ],
)
def test_errors_name_the_line_and_what_was_expected(text: str, line: int, expected: str) -> None:
    with pytest.raises(TraceFormatError) as err:
        parse_trace(text, "trace.md")
    assert err.value.line == line
    assert str(err.value).startswith(f"trace.md:{line}: expected ")
    assert expected in str(err.value)


def test_read_trace_refuses_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "trace.md"
    path.write_bytes(b"# Trace: w\n**Status:** in-progress\n**Summary:** caf\xe9\n")
    with pytest.raises(TraceFormatError, match=r"trace\.md:3: expected UTF-8 text"):
        read_trace(path)


# -- the recovery check ------------------------------------------------------------------------

AUTH_FILES = ("docs/auth_api.md", "src/auth/login.py", "src/api/routes.py")


def test_example_1_between_steps_resumes_without_asking(tmp_path: Path) -> None:
    touch(tmp_path, "tasks/auth_feature/tracking.md", *AUTH_FILES)
    decision = decide(fixture("between_steps.md"), tmp_path)
    assert decision.message == (
        "Steps 1-2 completed (orient, design). Resuming from Step 3: implement."
    )
    assert (decision.state, decision.resume_step, decision.resume_name) == (
        TraceState.between_steps,
        3,
        "implement",
    )
    assert decision.options == ()
    assert not decision.needs_owner


def test_example_2_mid_step_asks_the_owner(tmp_path: Path) -> None:
    touch(tmp_path, *AUTH_FILES)
    decision = decide(fixture("mid_step.md"), tmp_path)
    assert decision.state is TraceState.mid_step
    assert decision.options == ("continue", "rerun", "investigate")
    assert decision.needs_owner
    assert (decision.resume_step, decision.resume_name) == (3, "implement")
    message = decision.message
    assert message.startswith("Step 3 (implement) was interrupted.\n")
    for line in (
        "Current focus: Token validation logic.",
        "Completed: user model, routes.",
        "Remaining: validation, tests.",
        "Artifacts verified: src/auth/login.py, src/api/routes.py",
    ):
        assert f"\n{line}\n" in message
    assert message.endswith(
        "How would you like to proceed?\n"
        "1. Continue from token validation logic\n"
        "2. Re-run Step 3 from beginning\n"
        "3. Investigate current state first"
    )
    assert "missing" not in message


def test_example_2_context_is_reconstructed(tmp_path: Path) -> None:
    touch(tmp_path, "tasks/auth_feature/tracking.md")
    context = reconstruct_context(fixture("mid_step.md"), tmp_path)
    assert (context.task_spec, context.task_spec_exists) == ("tasks/auth_feature/tracking.md", True)
    decisions = {n.step: n.text for n in context.key_decisions}
    assert decisions == {
        1: "Auth lives in its own package, src/auth.",
        3: "Using JWT with 24h expiry, refresh tokens stored in DB",
    }
    assert context.current_focus.startswith("Token validation logic.")
    assert [a.path for a in context.artifacts] == ["src/auth/login.py", "src/api/routes.py"]
    assert not reconstruct_context(fixture("mid_step.md"), tmp_path / "elsewhere").task_spec_exists


def test_example_3_failed_step_offers_retry_skip_back_abort(tmp_path: Path) -> None:
    touch(tmp_path, *AUTH_FILES)
    decision = decide(fixture("failed.md"), tmp_path)
    assert decision.state is TraceState.failed
    assert decision.options == ("retry", "skip", "back", "abort")
    assert decision.options[2] is OwnerOption.back
    assert decision.needs_owner
    assert decision.message == (
        "Step 4 (validate) failed in prior session.\n"
        "Summary: Tests failed — 3 of 12 tests failing.\n"
        "Challenges: Auth endpoint returns 401 for valid tokens.\n\n"
        "How would you like to proceed?\n"
        "1. Retry Step 4\n"
        "2. Skip Step 4\n"
        "3. Go back to Step 3 (implement) to fix\n"
        "4. Abort workflow"
    )
    with_plan = decide(
        fixture("failed.md"), tmp_path, ["orient", "design", "implement", "validate", "document"]
    )
    assert "2. Skip Step 4 and continue with Step 5 (document)\n" in with_plan.message


def test_going_back_makes_the_earlier_step_current(tmp_path: Path) -> None:
    touch(tmp_path, *AUTH_FILES)
    back = start_step(fixture("failed.md"), 3, "implement", current_focus="the 401")
    assert classify(back) is TraceState.mid_step  # not "Step 4 failed": Step 3 is being redone
    decision = decide(back, tmp_path)
    assert (decision.resume_step, decision.resume_name) == (3, "implement")
    assert decision.message.startswith("Step 3 (implement) was interrupted.\n")


def test_completed_workflow_is_not_re_run(tmp_path: Path) -> None:
    touch(tmp_path, *AUTH_FILES, "tests/test_login.py", "README.md")
    decision = decide(fixture("completed.md"), tmp_path)
    assert decision.state is TraceState.completed
    assert (decision.options, decision.needs_owner, decision.resume_step) == ((), False, None)
    assert "completed (" in decision.message
    assert "Not re-running it" in decision.message
    with pytest.raises(ValueError, match="not resumed"):
        resume_entry(decision, "2030-01-01T00:00:00Z", "s3")


def test_a_missing_artifact_is_flagged(tmp_path: Path) -> None:
    touch(tmp_path, *AUTH_FILES)
    (tmp_path / "src/api/routes.py").unlink()
    checks = verify_artifacts(fixture("mid_step.md"), tmp_path)
    assert [(c.path, c.exists) for c in checks] == [
        ("src/auth/login.py", True),
        ("src/api/routes.py", False),
    ]
    decision = decide(fixture("mid_step.md"), tmp_path)
    assert "Artifacts verified: src/auth/login.py\n" in decision.message
    assert "Artifacts missing: src/api/routes.py (listed in the trace, not found)" in (
        decision.message
    )
    assert [c.path for c in decision.missing] == ["src/api/routes.py"]
    # between steps, a discrepancy turns the automatic resume into a question
    (tmp_path / "docs/auth_api.md").unlink()
    between = decide(fixture("between_steps.md"), tmp_path)
    assert between.needs_owner
    assert between.options == ("continue", "investigate")
    assert "Artifacts missing: docs/auth_api.md" in between.message


def test_not_started_and_the_lifecycle_through_the_helpers(tmp_path: Path) -> None:
    trace = new_trace("auth_feature", "spec.md", ["orient", "design"], started="t0")
    assert classify(trace) is TraceState.not_started
    first = decide(trace, tmp_path)
    assert (first.resume_step, first.needs_owner) == (1, False)
    assert first.message == "No step has started yet. Starting from Step 1: orient."
    trace = start_step(trace, 1, "orient", current_focus="reading")
    assert classify(trace) is TraceState.mid_step
    trace = complete_step(trace, 1, summary="Read it.", artifacts=["Created notes.md"])
    assert classify(trace) is TraceState.between_steps
    trace = start_step(trace, 2, "design")
    trace = fail_step(trace, 2, summary="Stuck.", challenges="No API docs.")
    assert classify(trace) is TraceState.failed
    assert decide(trace, tmp_path).options == ("retry", "skip", "back", "abort")
    trace = start_step(trace, 3, "document")  # the next step may be added as it starts
    trace = complete_step(trace, 3)
    trace = complete_workflow(trace)
    assert classify(trace) is TraceState.completed
    assert parse_trace(render_trace(trace), "t") == trace
    with pytest.raises(StepMismatch, match="'design', not 'desing'"):
        start_step(trace, 2, "desing")
    with pytest.raises(StepMismatch, match="no Step 7"):
        update_step(trace, 7, summary="x")


def test_resume_entry_in_the_seed_format(tmp_path: Path) -> None:
    touch(tmp_path, "tasks/auth_feature/tracking.md", *AUTH_FILES)
    trace = fixture("between_steps.md")
    entry = resume_entry(decide(trace, tmp_path), "2025-03-03T08:00:00Z", "s3")
    assert entry == ResumeEntry(
        step=3,
        step_name="implement",
        prior_completed=2,
        resumed="2025-03-03T08:00:00Z — session s3",
        context_from=(
            "tasks/auth_feature/tracking.md, key decisions of Step 1, artifacts (1 of 1 present)"
        ),
    )
    text = render_trace(append_resume(trace, entry))
    assert text.endswith(
        "---\n\n## Resume\n\n"
        "**Resumed:** 2025-03-03T08:00:00Z — session s3\n"
        "**Resuming from:** Step 3 — implement\n"
        "**Prior steps completed:** 2\n"
        "**Context reconstructed from:** tasks/auth_feature/tracking.md, key decisions of Step 1,"
        " artifacts (1 of 1 present)\n"
    )
    assert parse_trace(text, "t").resumes == (entry,)


# -- the file ----------------------------------------------------------------------------------


def test_write_then_read(tmp_path: Path) -> None:
    path = tmp_path / "trace.md"
    trace = fixture("failed.md")
    write_trace_atomic(path, trace)
    assert read_trace(path) == trace
    assert path.read_text(encoding="utf-8") == (FIXTURES / "failed.md").read_text("utf-8")
    os.chmod(path, 0o600)
    write_trace_atomic(path, complete_workflow(trace))
    assert read_trace(path).status is WorkflowStatus.completed
    assert (path.stat().st_mode & 0o777) == 0o600  # the owner's permissions are kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.md"]  # no temp file left


def test_helpers_store_text_as_it_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "trace.md"
    trace = new_trace("w", "spec.md ", ["build ", "test"])
    trace = start_step(trace, 1, "build", current_focus="\r\n  compiling  \r\n")
    stderr = "  warning: x  \r\n## not a heading\r\n---\rprogress 50%\t\n\n"
    trace = fail_step(trace, 1, challenges=stderr, artifacts=["  Created a.py\n", "", "b, c.py"])
    write_trace_atomic(path, trace)  # would refuse a value that does not read back
    step = read_trace(path).steps[0]
    assert step.current_focus == "compiling"
    assert step.challenges == "warning: x\n## not a heading\n---\nprogress 50%"
    assert step.artifacts == (Artifact("Created a.py"), Artifact("b, c.py"))
    assert read_trace(path) == trace


BROKEN = b"# Trace: w\n**Status:** in-progress\n\n## Step 1: a\n**Status:** done\n"


def test_an_unparseable_trace_is_never_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "trace.md"
    path.write_bytes(BROKEN)
    attempts = [
        lambda: update_trace(path, lambda t: start_step(t, 1, "a")),
        lambda: write_trace_atomic(path, new_trace("w", "spec.md", ["a"])),
    ]
    for attempt in attempts:
        with pytest.raises(TraceFormatError, match=r"trace\.md:5: expected \*\*Status:\*\*"):
            attempt()
        assert path.read_bytes() == BROKEN
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.md"]


def test_a_failing_change_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "trace.md"
    original = (FIXTURES / "hand_edited.md").read_bytes()
    path.write_bytes(original)
    with pytest.raises(StepMismatch):
        update_trace(path, lambda t: fail_step(t, 9))
    bad = dataclasses.replace(fixture("mid_step.md"), sections=(TraceStep(2, "out of order"),))
    with pytest.raises(TraceFormatError, match=r"expected '## Step 1: <name>'"):
        write_trace_atomic(path, bad)  # would not read back: refused before touching the file
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.md"]


# -- property: parse(render(t)) == t ------------------------------------------------------------

_TRICKY = st.sampled_from(
    [
        "---",
        "## Notes",
        "# Title",
        "#",
        "**Owner:** x",
        "\\",
        "- item",
        "* x",
        "## Step 9: x",
        "  **Status:** done",
        ",",
        " - ",
        "Completed:",
        "**",
        ":**",
        "—",
        "\t",
        "  ",
    ]
)
_CHARS = st.characters(blacklist_categories=("Cs", "Cc"))
_PIECE = st.one_of(st.text(_CHARS, max_size=10), _TRICKY)
_LINE = st.lists(_PIECE, max_size=3).map("".join)


def _trim(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _value(lines: list[str]) -> str:
    lines = _trim(lines)
    return "\n".join([lines[0].lstrip(), *lines[1:]]) if lines else ""


VALUE = st.lists(_LINE, max_size=4).map(_value)
FREE_TEXT = st.lists(_LINE, min_size=1, max_size=3).map(lambda ls: "\n".join(_trim(ls)))
ONE_LINE = _LINE.map(str.strip)
NAME = ONE_LINE.map(lambda s: s or "x")
_H2 = re.compile(r"##(?:[ \t]|$)")


def _extras(names: list[str], anchors: list[str]) -> st.SearchStrategy[tuple[ExtraField, ...]]:
    named = st.lists(
        st.builds(ExtraField, st.sampled_from(names), VALUE, st.sampled_from(["", *anchors])),
        max_size=3,
    )
    free = st.lists(FREE_TEXT.map(lambda v: ExtraField("", v or "note", "")), max_size=1)
    # as the parser reports them: free text first, then in the order of their anchors
    order = ["", *anchors]
    return st.tuples(free, named).map(
        lambda fn: (*fn[0], *sorted(fn[1], key=lambda e: order.index(e.after)))
    )


STEP_KEYS = ["status", "summary", "artifacts", "key decisions", "current focus", "challenges"]
STEPS = st.builds(
    TraceStep,
    number=st.just(0),
    name=NAME,
    status=st.sampled_from(StepStatus),
    summary=VALUE,
    artifacts=st.lists(NAME.map(Artifact), max_size=3).map(tuple),
    key_decisions=VALUE,
    current_focus=VALUE,
    challenges=VALUE,
    extra=_extras(["Owner", "Task spec", "Started", "Due  date"], STEP_KEYS),
)
RESUMES = st.builds(
    ResumeEntry,
    step=st.integers(0, 99),
    step_name=ONE_LINE,
    prior_completed=st.integers(0, 99),
    resumed=VALUE,
    context_from=VALUE,
    extra=_extras(
        ["Status", "Summary", "owner"],
        ["resumed", "resuming from", "prior steps completed", "context reconstructed from"],
    ),
)
RAWS = st.builds(
    RawSection,
    heading=ONE_LINE.filter(
        lambda h: h.casefold() != "resume" and not re.match(r"step[\s\d:]|step$", h, re.I)
    ),
    body=st.lists(st.text(_CHARS, max_size=12).filter(lambda x: not _H2.match(x)), max_size=3).map(
        lambda ls: "\n".join(_trim_raw(ls))
    ),
)


def _trim_raw(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and (not lines[-1].strip() or re.match(r"\s*-{3,}\s*$", lines[-1])):
        lines = lines[:-1]
    return lines


def _numbered(sections: list[Section]) -> tuple[Section, ...]:
    out: list[Section] = []
    for s in sections:
        if isinstance(s, TraceStep):
            s = dataclasses.replace(s, number=1 + sum(isinstance(x, TraceStep) for x in out))
        out.append(s)
    return tuple(out)


TRACES = st.builds(
    Trace,
    status=st.sampled_from(WorkflowStatus),
    task_spec=VALUE,
    workflow=VALUE,
    title=ONE_LINE,
    started=VALUE,
    extra=_extras(
        ["Owner", "Reviewer", "Due date"], ["task spec", "workflow", "status", "started"]
    ),
    sections=st.lists(st.one_of(STEPS, RESUMES, RAWS), max_size=5).map(_numbered),
)


@settings(max_examples=300, deadline=None)
@given(TRACES)
def test_parse_of_render_is_identity(trace: Trace) -> None:
    text = render_trace(trace)
    assert parse_trace(text, "trace.md") == trace
    assert render_trace(parse_trace(text, "trace.md")) == text
