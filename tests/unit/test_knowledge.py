"""The knowledge store on a real memory.db: keyword extraction, kept once, ranked by
relevance, forgotten by id or unique prefix."""

from __future__ import annotations

from pathlib import Path

from pfar.vault.knowledge import KnowledgeStore, extract
from pfar.vault.sqlite import open_vault_db


def test_keyword_mode_takes_marked_sentences_once() -> None:
    texts = [
        "I looked around. The bug was in config.rs: the parser expects arrays. All done!",
        "Turns out the API allows 100 requests a minute.\nThe bug was in config.rs: the "
        "parser expects arrays.",
        "ok",
    ]
    found = extract(texts)
    assert [c for c, _ in found] == [
        "The bug was in config.rs: the parser expects arrays.",
        "Turns out the API allows 100 requests a minute.",
    ]
    assert "config.rs" in found[0][1] and "parser" in found[0][1]


def test_kept_once_ranked_and_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    open_vault_db(path, "memory", create=True).close()
    store = KnowledgeStore.open(path)
    try:
        a = store.add("config.rs parser expects arrays", "task-a", ("config", "parser"), "t1")
        b = store.add("the API allows 100 requests a minute", "task-b", ("api",), "t2")
        assert a is not None and b is not None
        assert store.add("config.rs parser expects arrays", "task-c", (), "t3") is None
        assert [x.learning_id for x in store.relevant("fix the config parser")] == [a.learning_id]
        assert store.relevant("fix the config parser", exclude_task="task-a") == []
        assert store.relevant("the and was") == []  # nothing but common words
        assert [x.learning_id for x in store.search(None)] == [b.learning_id, a.learning_id]
        assert store.forget("") is None  # every id starts so: not unique
        assert store.forget(a.learning_id[:8]) == a
        assert store.relevant("config parser") == []
    finally:
        store.close()
