-- The persistence spec's tables (§4.1, §5.1, §6.1, §8.2) plus pfar's own:
-- one row per step, inbound events, the owner outbox, kernel boots.
CREATE TABLE schema_version (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  TEXT NOT NULL
);

CREATE TABLE task_journal (
    task_id         TEXT PRIMARY KEY,
    template_id     TEXT NOT NULL,
    principal       TEXT NOT NULL,
    trigger_event   TEXT,
    state           TEXT NOT NULL,
    phase           TEXT NOT NULL,
    plan_json       TEXT,
    execute_progress TEXT,
    extracted_metadata TEXT,
    data_ceiling    TEXT NOT NULL,
    output_sinks    TEXT NOT NULL,
    trace_id        TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    error           TEXT,
    -- pfar: the state's payload (current_step, approval_id, step, service, ...)
    state_detail    TEXT NOT NULL DEFAULT '{}',
    event_id        TEXT,
    template_hash   TEXT NOT NULL DEFAULT '',
    recovery_attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_task_journal_state ON task_journal(state);
CREATE INDEX idx_task_journal_updated ON task_journal(updated_at);
-- recovery reads only unfinished tasks: its cost grows with them, not with history.
-- Keyed by task_id, not updated_at, so a step's progress does not move its entry.
CREATE INDEX idx_task_journal_unfinished ON task_journal(task_id)
    WHERE state NOT IN ('Completed', 'Failed', 'Abandoned');

CREATE TABLE task_steps (
    task_id      TEXT NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    step         INTEGER NOT NULL,
    tool         TEXT NOT NULL,
    semantics    TEXT NOT NULL,
    idempotency  TEXT NOT NULL,
    status       TEXT NOT NULL,
    args_json    TEXT NOT NULL,
    result_json  TEXT,
    label        TEXT NOT NULL DEFAULT 'Extracted',
    started_at   TEXT NOT NULL,
    completed_at TEXT,
    error        TEXT,
    -- a process the step started (pid, start time): ended at restart if it outlived us
    process_json TEXT,
    PRIMARY KEY (task_id, step)
) WITHOUT ROWID;
CREATE INDEX idx_task_steps_started ON task_steps(status) WHERE status = 'started';

CREATE TABLE pending_approvals (
    approval_id     TEXT PRIMARY KEY,
    task_id         TEXT NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    action_type     TEXT NOT NULL,
    description     TEXT NOT NULL,
    data_preview    TEXT,
    taint_level     TEXT,
    target_sink     TEXT,
    tool            TEXT,
    step            INTEGER,
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending',
    -- pfar: the answers offered, the one given, when, and how often it was sent
    options_json    TEXT NOT NULL DEFAULT '["approve","deny"]',
    decision        TEXT,
    decided_at      TEXT,
    prompts_sent    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_pending_approvals_status ON pending_approvals(status);
CREATE INDEX idx_pending_approvals_task ON pending_approvals(task_id);

CREATE TABLE pending_credentials (
    prompt_id       TEXT PRIMARY KEY,
    task_id         TEXT NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    service         TEXT NOT NULL,
    credential_type TEXT NOT NULL,
    instructions    TEXT NOT NULL,
    vault_ref       TEXT NOT NULL,
    message_id      TEXT,
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending',
    step            INTEGER,
    received_at     TEXT
);
CREATE INDEX idx_pending_credentials_status ON pending_credentials(status);
CREATE INDEX idx_pending_credentials_task ON pending_credentials(task_id);

CREATE TABLE adapter_state (
    adapter     TEXT PRIMARY KEY,
    state_json  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

-- An event's id is committed with the task it creates: a redelivery finds it here.
CREATE TABLE inbound_events (
    event_id    TEXT PRIMARY KEY,
    adapter     TEXT NOT NULL,
    task_id     TEXT,
    received_at TEXT NOT NULL
);
CREATE INDEX idx_inbound_events_received ON inbound_events(received_at);

-- Messages to the owner, written before they are sent; the key makes a resend a no-op.
CREATE TABLE owner_outbox (
    message_key  TEXT PRIMARY KEY,
    seq          INTEGER NOT NULL,
    sink         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    task_id      TEXT,
    body         TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    delivered_at TEXT
);
CREATE INDEX idx_owner_outbox_pending ON owner_outbox(seq) WHERE status = 'pending';
-- the next seq is max(seq) + 1: an index keeps that O(log n) however long the outbox
CREATE UNIQUE INDEX idx_owner_outbox_seq ON owner_outbox(seq);

CREATE TABLE kernel_boots (
    boot_id     TEXT PRIMARY KEY,
    pid         INTEGER NOT NULL,
    version     TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    ended_at    TEXT,
    clean       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_kernel_boots_started ON kernel_boots(started_at);
