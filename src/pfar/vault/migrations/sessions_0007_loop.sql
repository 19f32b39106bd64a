-- The agentic loop (runners/loop): each loop task's settings, its conversation as
-- appended turns (never a snapshot rewritten per turn: turn 500 costs what turn 5 does),
-- and the owner's "always allow" / "never allow" answers, which apply to later tasks.
CREATE TABLE loop_tasks (
    task_id         TEXT PRIMARY KEY REFERENCES task_journal(task_id) ON DELETE CASCADE,
    settings_json   TEXT NOT NULL,
    parent_task_id  TEXT
);
CREATE INDEX idx_loop_tasks_parent ON loop_tasks(parent_task_id) WHERE parent_task_id IS NOT NULL;

CREATE TABLE loop_turns (
    task_id     TEXT NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    body_json   TEXT NOT NULL,
    at          TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;

CREATE TABLE permission_rules (
    tool        TEXT NOT NULL,
    pattern     TEXT NOT NULL,
    decision    TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
    task_id     TEXT,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tool, pattern)
);
