"""A task's learnings stored again after a restart: each under an id fixed by its task
and place, so the second store returns the first one and adds nothing."""

from __future__ import annotations

from pathlib import Path

from pfar.vault.knowledge import KnowledgeStore, learning_id_for
from pfar.vault.sqlite import open_vault_db


def test_storing_a_tasks_learning_again_keeps_it_once(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    open_vault_db(path, "memory", create=True).close()
    store = KnowledgeStore.open(path)
    try:
        first_id = learning_id_for("task-a", 0)
        assert first_id == learning_id_for("task-a", 0) != learning_id_for("task-a", 1)
        assert first_id != learning_id_for("task-b", 0)
        first = store.add("config.rs parser expects arrays", "task-a", ("parser",), "t1", first_id)
        assert first is not None and first.learning_id == first_id
        again = store.add("config.rs parser expects arrays", "task-a", ("parser",), "t2", first_id)
        assert again == first  # the one stored before the crash, as it was stored
        # the same sentence from another task is said before: not kept twice
        other = learning_id_for("task-b", 0)
        assert store.add("config.rs parser expects arrays", "task-b", (), "t3", other) is None
        assert [x.learning_id for x in store.search(None)] == [first_id]
    finally:
        store.close()
