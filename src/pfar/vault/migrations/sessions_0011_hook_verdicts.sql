-- Hooks (seed 001, "Hook Points Overview"): what a point's handlers decided that changes
-- what a task does (a modified request, a blocked tool, injected context), keyed by the
-- point and the step or turn it was asked about. A resumed task replays the verdict
-- instead of asking the handlers again and getting a different answer.
CREATE TABLE hook_verdicts (
    task_id      TEXT NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    key          TEXT NOT NULL,
    verdict_json TEXT NOT NULL,
    at           TEXT NOT NULL,
    PRIMARY KEY (task_id, key)
) WITHOUT ROWID;
