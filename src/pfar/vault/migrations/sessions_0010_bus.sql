-- The event bus (seed 001, "Event bus"): typed events about tasks, appended in the
-- transaction of the move they describe, numbered in commit order. A subscriber keeps
-- the number of the last event it handled (its offset) and, after being down, goes on
-- from there. Events past the journal's retention are dropped with the tasks.
CREATE TABLE bus_events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    kind     TEXT NOT NULL,
    task_id  TEXT,
    body_json TEXT NOT NULL,
    at       TEXT NOT NULL
);
CREATE INDEX bus_events_at ON bus_events(at);

CREATE TABLE bus_offsets (
    subscriber TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
