-- The knowledge store (seed 001, "Cross-Task Knowledge Sharing"): what a task learned,
-- for the tasks after it. `learnings` is the record; `learnings_fts` its full-text
-- index (SQLite's FTS5, ranked by bm25), written in the same transaction.
CREATE TABLE learnings (
    learning_id  TEXT PRIMARY KEY,
    content      TEXT NOT NULL UNIQUE,
    source_task  TEXT,
    tags_json    TEXT NOT NULL,
    created_at   TEXT NOT NULL
) WITHOUT ROWID;

CREATE VIRTUAL TABLE learnings_fts USING fts5(
    learning_id UNINDEXED,
    content,
    tags
);
