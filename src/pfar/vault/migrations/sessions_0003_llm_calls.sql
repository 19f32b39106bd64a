-- Every model call a task made: its usage and cost, for the owner's accounting.
CREATE TABLE llm_calls (
    call_id       INTEGER PRIMARY KEY,
    task_id       TEXT NOT NULL,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    time_to_first_token REAL,
    total_time    REAL NOT NULL,
    cost_usd      REAL NOT NULL,
    queued_seconds REAL NOT NULL,
    granted_at    REAL NOT NULL DEFAULT 0,
    at            TEXT NOT NULL
);
CREATE INDEX idx_llm_calls_task ON llm_calls(task_id);
