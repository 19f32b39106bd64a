"""The knowledge store (seed 001, Phases 2.3 and 6.3): learnings in `memory.db`.

A loop task that completes leaves what it learned: sentences of its answers that carry
a learning's marks ("the bug was", "expects", "turns out", "remember", ...), kept in
keyword mode as they were said, tagged with their longest words. A loop task that
starts is given the five learnings of other tasks most relevant to its prompt
(SQLite FTS5, ranked by bm25), in its system prompt; they are fixed when the task is
created and journaled with it, so a resumed task sees the same ones.

The store is a help, never a dependency: a damaged or missing `memory.db` is logged,
and the task goes on without learnings.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .driver import sqlite
from .keys import VaultKey
from .sqlite import open_vault_db

TOP = 5  # learnings given to a new task
MAX_CHARS = 400  # a learning longer than this is not one sentence of a learning

# what a sentence that records a learning says (keyword mode)
_MARKS = re.compile(
    r"\b(the (?:bug|problem|issue|cause|fix) (?:was|is)|root cause|turns? out|"
    r"learn(?:ed|t)|remember|note that|expects?|requires?|must (?:be|not)|"
    r"(?:is|was) caused by|works? only|does not work|fixed by|the trick)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{2,}")
_STOP = frozenset(
    {
        "the",
        "and",
        "was",
        "that",
        "this",
        "with",
        "from",
        "have",
        "been",
        "were",
        "what",
        "when",
        "where",
        "which",
        "there",
        "their",
        "they",
        "them",
        "then",
        "than",
        "into",
        "onto",
        "also",
        "only",
        "does",
        "not",
        "but",
        "are",
        "for",
        "its",
        "you",
        "your",
        "our",
        "will",
        "would",
        "could",
        "should",
        "about",
        "after",
        "before",
        "because",
        "note",
        "remember",
        "learned",
        "learnt",
        "turns",
        "turned",
        "out",
        "expects",
        "expect",
        "requires",
        "require",
        "must",
    }
)


@dataclass(frozen=True, slots=True)
class Learning:
    learning_id: str
    content: str
    source_task: str | None
    tags: tuple[str, ...]
    created_at: str

    def line(self) -> str:
        """As a new task's system prompt shows it."""
        source = f" (from task {self.source_task[:8]})" if self.source_task else ""
        return f"{self.content}{source}"


def extract(texts: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The learnings in `texts` (keyword mode): each marked sentence, with its tags."""
    found: list[tuple[str, tuple[str, ...]]] = []
    seen: set[str] = set()
    for text in texts:
        for sentence in _SENTENCE.split(text):
            sentence = " ".join(sentence.split()).strip("-*• ")
            if not 20 <= len(sentence) <= MAX_CHARS or not _MARKS.search(sentence):
                continue
            if sentence.lower() in seen:
                continue
            seen.add(sentence.lower())
            found.append((sentence, tags_of(sentence)))
    return found


REFINE_SYSTEM = (
    "You keep a coding agent's notebook of learnings: facts about a codebase or a "
    "system that would save a later task time. You are given candidate sentences taken "
    "from one finished task. Keep only real learnings; rewrite each as one short, "
    "self-contained sentence (name the file, command or system it is about). Drop "
    "progress reports and anything only true of this one task. Answer with a JSON array "
    "of strings and nothing else; [] when none is worth keeping."
)


def refine_request(task_prompt: str, candidates: list[str]) -> str:
    """The cheap tier's question in hybrid mode: which candidates to keep, reworded."""
    lines = "\n".join(f"- {c}" for c in candidates)
    return f"The task was: {task_prompt[:1000]}\n\nCandidate learnings:\n{lines}"


def refined(answer: str, candidates: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The model's answer as learnings: a JSON array of sentences, at most as many as
    there were candidates, each of a learning's length. ValueError otherwise (the
    keyword candidates are then kept as they were)."""
    text = answer.strip()
    if text.startswith("```"):  # a fenced answer: the array inside it
        text = text.strip("`").removeprefix("json").strip()
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"not a JSON array: {answer[:80]!r}") from None
    if not isinstance(found, list) or not all(isinstance(x, str) for x in found):
        raise ValueError("not a JSON array of strings")
    if len(found) > len(candidates):
        raise ValueError(f"{len(found)} learnings from {len(candidates)} candidates")
    out = []
    for sentence in found:
        sentence = " ".join(sentence.split())
        if not 20 <= len(sentence) <= MAX_CHARS:
            raise ValueError(f"a learning of {len(sentence)} characters (20 to {MAX_CHARS})")
        out.append((sentence, tags_of(sentence)))
    return out


def learning_id_for(task_id: str, n: int) -> str:
    """The id of a task's `n`th learning: the same each time it is stored."""
    return str(uuid.uuid5(_LEARNING_IDS, f"{task_id}:{n}"))


_LEARNING_IDS = uuid.UUID("5d0f1c1e-8d0a-4b8e-9a55-6c6561726e73")


def tags_of(text: str) -> tuple[str, ...]:
    words = [w.lower().strip(".-") for w in _WORD.findall(text)]
    kept = sorted({w for w in words if w not in _STOP and len(w) >= 4}, key=lambda w: -len(w))
    return tuple(kept[:5])


class KnowledgeStore:
    """`memory.db`'s learnings. Its own connection (not the journal's writer): learnings
    are a help, written at a task's end, never part of a task's state."""

    def __init__(self, conn: sqlite.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls, path: Path, *, key: VaultKey | None = None, readonly: bool = False
    ) -> KnowledgeStore:
        return cls(open_vault_db(path, "memory", key=key, readonly=readonly))

    def close(self) -> None:
        self._conn.close()

    @contextlib.contextmanager
    def _txn(self) -> Iterator[None]:
        """One transaction (the connection commits each statement on its own otherwise)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def add(
        self,
        content: str,
        source_task: str | None,
        tags: tuple[str, ...],
        at: str,
        learning_id: str | None = None,
    ) -> Learning | None:
        """Keep a learning; None when the same one is kept already. With `learning_id`
        (learning_id_for), adding it again returns the one kept the first time: a
        restart that stores a task's learnings again stores each once."""
        learning = Learning(learning_id or str(uuid.uuid4()), content, source_task, tags, at)
        with self._lock, self._txn():
            try:
                self._conn.execute(
                    "INSERT INTO learnings(learning_id, content, source_task, tags_json, "
                    "created_at) VALUES (?, ?, ?, ?, ?)",
                    (learning.learning_id, content, source_task, json.dumps(list(tags)), at),
                )
            except sqlite.IntegrityError:
                row = self._conn.execute(
                    "SELECT learning_id, content, source_task, tags_json, created_at "
                    "FROM learnings WHERE learning_id = ?",
                    (learning.learning_id,),
                ).fetchone()
                # this very learning, stored before a crash; else said before: kept once
                return None if learning_id is None or row is None else _learning(row)
            self._conn.execute(
                "INSERT INTO learnings_fts(learning_id, content, tags) VALUES (?, ?, ?)",
                (learning.learning_id, content, " ".join(tags)),
            )
        return learning

    def relevant(
        self, text: str, *, exclude_task: str | None = None, limit: int = TOP
    ) -> list[Learning]:
        """The learnings most relevant to `text` (bm25 over content and tags)."""
        words = {w.lower().strip(".-") for w in _WORD.findall(text)} - _STOP
        if not words:
            return []
        query = " OR ".join(f'"{w}"' for w in sorted(words) if '"' not in w)
        with self._lock:
            rows = self._conn.execute(
                "SELECT l.learning_id, l.content, l.source_task, l.tags_json, l.created_at "
                "FROM learnings_fts f JOIN learnings l ON l.learning_id = f.learning_id "
                "WHERE learnings_fts MATCH ? AND (l.source_task IS NOT ? OR l.source_task IS NULL) "
                "ORDER BY bm25(learnings_fts) LIMIT ?",
                (query, exclude_task, limit),
            ).fetchall()
        return [_learning(r) for r in rows]

    def search(self, text: str | None, limit: int = 50) -> list[Learning]:
        """`pfar learnings [search TEXT]`: the newest, or the ones matching `text`."""
        if text:
            return self.relevant(text, limit=limit)
        with self._lock:
            rows = self._conn.execute(
                "SELECT learning_id, content, source_task, tags_json, created_at FROM learnings "
                "ORDER BY created_at DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [_learning(r) for r in rows]

    def forget(self, learning_id: str) -> Learning | None:
        """Drop a learning (an id or a unique prefix of one); the one dropped."""
        with self._lock, self._txn():
            rows = self._conn.execute(
                "SELECT learning_id, content, source_task, tags_json, created_at FROM learnings "
                "WHERE learning_id LIKE ? || '%'",
                (learning_id,),
            ).fetchall()
            if len(rows) != 1:
                return None
            found = _learning(rows[0])
            self._conn.execute("DELETE FROM learnings WHERE learning_id = ?", (found.learning_id,))
            self._conn.execute(
                "DELETE FROM learnings_fts WHERE learning_id = ?", (found.learning_id,)
            )
        return found


def _learning(row: tuple[str, str, str | None, str, str]) -> Learning:
    return Learning(row[0], row[1], row[2], tuple(json.loads(row[3])), row[4])
