"""The task list a page at a time: each filter narrows it, alone and together, and a
cursor pages through it newest first without repeating or skipping a task, whatever is
created meanwhile."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from pfar.journal import TaskKind, TaskRecord, TaskState
from pfar.journal.records import rfc3339
from pfar.journal.store import Store
from pfar.journal.task_pages import TaskCursor, TaskFilter, TaskPage

from . import builders as b
from .backends import Backend
from .helpers import run
from .verbs import covers

S = TaskState
T0 = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)


def made(
    store: Store,
    minutes: float,
    *,
    state: TaskState = S.Executing,
    kind: TaskKind = TaskKind.pipeline,
    template: str = "tpl",
    text: str = "hello",
) -> TaskRecord:
    """A task created `minutes` after T0."""
    at = rfc3339(T0 + timedelta(minutes=minutes))
    t = replace(b.task(state, text=text, updated_at=at), kind=kind, template_id=template)
    got, fresh = run(store.tasks.create(t))
    assert fresh and got == t
    return t


def ids(page: TaskPage) -> list[str]:
    return [t.task_id for t in page.tasks]


def listed(store: Store, wanted: TaskFilter, limit: int = 100) -> list[str]:
    page = run(store.tasks.page(wanted, None, limit))
    assert page.next_cursor is None
    return ids(page)


@covers("tasks.page")
def test_each_filter_narrows_the_list_alone_and_together(store: Store) -> None:
    a = made(store, 0, state=S.Failed, kind=TaskKind.pipeline, template="mail", text="Pay rent")
    c = made(store, 10, state=S.Executing, kind=TaskKind.loop, template="loop", text="fix bug")
    d = made(store, 20, state=S.Failed, kind=TaskKind.loop, template="mail", text="rent due")
    e = made(store, 30, state=S.Completed, kind=TaskKind.workflow, template="wf", text="")
    every = [e.task_id, d.task_id, c.task_id, a.task_id]  # newest first
    assert listed(store, TaskFilter()) == every
    assert listed(store, TaskFilter(states=(S.Failed,))) == [d.task_id, a.task_id]
    assert listed(store, TaskFilter(states=(S.Failed, S.Completed))) == [
        e.task_id,
        d.task_id,
        a.task_id,
    ]
    assert listed(store, TaskFilter(kind=TaskKind.loop)) == [d.task_id, c.task_id]
    assert listed(store, TaskFilter(kind=TaskKind.workflow)) == [e.task_id]
    assert listed(store, TaskFilter(template_id="mail")) == [d.task_id, a.task_id]
    assert listed(store, TaskFilter(template_id="nothing")) == []
    since, until = rfc3339(T0 + timedelta(minutes=10)), rfc3339(T0 + timedelta(minutes=30))
    # since is inclusive, until exclusive: a window of days is a run of them
    assert listed(store, TaskFilter(created_since=since)) == every[:3]
    assert listed(store, TaskFilter(created_until=until)) == every[1:]
    assert listed(store, TaskFilter(created_since=since, created_until=until)) == every[1:3]
    assert listed(store, TaskFilter(text="RENT")) == [d.task_id, a.task_id]
    assert listed(store, TaskFilter(text="bug")) == [c.task_id]
    together = TaskFilter(
        states=(S.Failed,), kind=TaskKind.loop, template_id="mail", created_since=since, text="re"
    )
    assert listed(store, together) == [d.task_id]
    assert listed(store, replace(together, kind=TaskKind.pipeline)) == []
    assert listed(store, replace(together, created_since=None, kind=None)) == [
        d.task_id,
        a.task_id,
    ]


@covers("tasks.page")
def test_text_is_a_literal_piece_even_with_like_wildcards(store: Store) -> None:
    percent = made(store, 0, text="100% sure")
    plain = made(store, 1, text="1000 sure")
    under = made(store, 2, text="snake_case name")
    other = made(store, 3, text="snakeXcase name")
    slash = made(store, 4, text="C:\\temp\\x")
    none = made(store, 5, text="")
    assert listed(store, TaskFilter(text="%")) == [percent.task_id]
    assert listed(store, TaskFilter(text="0% s")) == [percent.task_id]
    assert listed(store, TaskFilter(text="_")) == [under.task_id]
    assert listed(store, TaskFilter(text="E_C")) == [under.task_id]
    assert listed(store, TaskFilter(text="\\")) == [slash.task_id]
    assert listed(store, TaskFilter(text="\\temp\\")) == [slash.task_id]
    assert listed(store, TaskFilter(text="sure")) == [plain.task_id, percent.task_id]
    assert listed(store, TaskFilter(text="case")) == [other.task_id, under.task_id]
    assert none.task_id not in listed(store, TaskFilter(text=" "))


@covers("tasks.page")
def test_text_folds_case_beyond_ascii(store: Store) -> None:
    creme = made(store, 0, text="Crème BRÛLÉE, s'il vous plaît")
    ecole = made(store, 1, text="ÉCOLE primaire")
    greek = made(store, 2, text="Σοφία ✓ 東京")
    assert listed(store, TaskFilter(text="brûlée")) == [creme.task_id]
    assert listed(store, TaskFilter(text="CRÈME")) == [creme.task_id]
    assert listed(store, TaskFilter(text="école")) == [ecole.task_id]
    assert listed(store, TaskFilter(text="σοφ")) == [greek.task_id]
    assert listed(store, TaskFilter(text="✓ 東京")) == [greek.task_id]
    assert listed(store, TaskFilter(text="brulee")) == []  # accents are letters of their own


@covers("tasks.page")
def test_a_cursor_pages_through_without_repeats_or_gaps_as_tasks_arrive(store: Store) -> None:
    # 25 tasks, some created at the same moment (the task id breaks the tie)
    first = [made(store, i // 3) for i in range(25)]
    expected = sorted(first, key=lambda t: (t.created_at, t.task_id), reverse=True)
    seen: list[str] = []
    page = run(store.tasks.page(TaskFilter(), None, 10))
    seen += ids(page)
    arrived = [made(store, 100), made(store, 100), made(store, 101)]  # newer than them all
    assert page.next_cursor is not None
    page = run(store.tasks.page(TaskFilter(), TaskCursor.decode(page.next_cursor), 10))
    seen += ids(page)
    arrived.append(made(store, 200))
    assert page.next_cursor is not None
    page = run(store.tasks.page(TaskFilter(), TaskCursor.decode(page.next_cursor), 10))
    assert len(page.tasks) == 5 and page.next_cursor is None  # the last page: no cursor
    seen += ids(page)
    assert seen == [t.task_id for t in expected]
    # what arrived meanwhile is at the head of the list now
    head = run(store.tasks.page(TaskFilter(), None, 4))
    assert set(ids(head)) == {t.task_id for t in arrived}


@covers("tasks.page")
def test_a_filtered_page_pages_on_its_filter_and_ends_without_a_cursor(store: Store) -> None:
    failed = [made(store, i, state=S.Failed if i % 2 else S.Completed) for i in range(8)]
    wanted = TaskFilter(states=(S.Failed,))
    one = run(store.tasks.page(wanted, None, 2))
    assert ids(one) == [failed[7].task_id, failed[5].task_id]
    assert one.next_cursor is not None
    two = run(store.tasks.page(wanted, TaskCursor.decode(one.next_cursor), 2))
    assert ids(two) == [failed[3].task_id, failed[1].task_id]
    # a page exactly full with nothing after it says so: no cursor to an empty page
    assert two.next_cursor is None
    assert run(store.tasks.page(TaskFilter(states=(S.Paused,)), None, 5)) == TaskPage([], None)


def test_a_page_is_read_in_an_index_order_not_sorted_from_all_history(
    store: Store, backend: Backend
) -> None:
    backend.check_task_pages_read_an_index(store)
