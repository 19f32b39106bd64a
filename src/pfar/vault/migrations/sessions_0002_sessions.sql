-- Agent sessions: one row per session bound to a chat thread and a project.
-- status moves CREATED -> ACTIVE <-> PAUSED, and any of them -> TERMINATED
-- (pfar.journal.sessions enforces the moves; the CHECKs keep the values sane).
-- context is a JSON object; process_json names the agent subprocess
-- (pid, start_time, argv) and is set only while the session is ACTIVE.
CREATE TABLE sessions (
    session_id   TEXT PRIMARY KEY,
    project_path TEXT NOT NULL,
    thread_id    TEXT NOT NULL,
    status       TEXT NOT NULL
        CHECK (status IN ('CREATED', 'ACTIVE', 'PAUSED', 'TERMINATED')),
    context      TEXT NOT NULL DEFAULT '{}'
        CHECK (json_valid(context) AND json_type(context) = 'object'),
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    process_json TEXT
        CHECK (process_json IS NULL OR (status = 'ACTIVE' AND json_valid(process_json)))
);
CREATE INDEX idx_sessions_status ON sessions(status);
-- one live session per chat thread: a TERMINATED one frees its thread
CREATE UNIQUE INDEX idx_sessions_live_thread ON sessions(thread_id)
    WHERE status != 'TERMINATED';
