-- The journal on PostgreSQL at schema 13, whole: the tables of sessions.db after
-- SQLite's migrations 1 to 13, with JSON as jsonb, numbers from sequences, and ids in
-- the C collation (a prefix of an id is a range of ids). A later migration is a new
-- file with the same number on both backends.
CREATE TABLE schema_version (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  text NOT NULL
);
CREATE TABLE task_journal (
    task_id           text COLLATE "C" PRIMARY KEY,
    template_id       text NOT NULL,
    principal         text NOT NULL,
    trigger_event     jsonb,
    state             text NOT NULL,
    phase             text NOT NULL,
    plan_json         jsonb,
    execute_progress  jsonb,
    extracted_metadata jsonb,
    data_ceiling      text NOT NULL,
    output_sinks      jsonb NOT NULL,
    trace_id          text,
    created_at        text NOT NULL,
    updated_at        text NOT NULL,
    error             text,
    state_detail      jsonb NOT NULL DEFAULT '{}',
    event_id          text,
    template_hash     text NOT NULL DEFAULT '',
    recovery_attempts bigint NOT NULL DEFAULT 0,
    kind              text NOT NULL DEFAULT 'pipeline'
);
CREATE INDEX idx_task_journal_state ON task_journal(state);
CREATE INDEX idx_task_journal_updated ON task_journal(updated_at);
CREATE INDEX idx_task_journal_unfinished ON task_journal(task_id)
    WHERE state NOT IN ('Completed', 'Failed', 'Abandoned', 'Cancelled');
CREATE INDEX idx_task_journal_kind ON task_journal(kind, created_at);
CREATE TABLE task_steps (
    task_id      text COLLATE "C" NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    step         bigint NOT NULL,
    tool         text NOT NULL,
    semantics    text NOT NULL,
    idempotency  text NOT NULL,
    status       text NOT NULL,
    args_json    jsonb NOT NULL,
    result_json  jsonb,
    label        text NOT NULL DEFAULT 'Extracted',
    started_at   text NOT NULL,
    completed_at text,
    error        text,
    process_json jsonb,
    PRIMARY KEY (task_id, step)
);
CREATE INDEX idx_task_steps_started ON task_steps(status) WHERE status = 'started';
CREATE TABLE pending_approvals (
    approval_id  text COLLATE "C" PRIMARY KEY,
    task_id      text COLLATE "C" NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    action_type  text NOT NULL,
    description  text NOT NULL,
    data_preview text,
    taint_level  text,
    target_sink  text,
    tool         text,
    step         bigint,
    created_at   text NOT NULL,
    expires_at   text NOT NULL,
    status       text NOT NULL DEFAULT 'pending',
    options_json jsonb NOT NULL DEFAULT '["approve","deny"]',
    decision     text,
    decided_at   text,
    prompts_sent bigint NOT NULL DEFAULT 0,
    args_sha256  text,
    decided_by   text
);
CREATE INDEX idx_pending_approvals_status ON pending_approvals(status);
CREATE INDEX idx_pending_approvals_task ON pending_approvals(task_id);
CREATE TABLE pending_credentials (
    prompt_id       text COLLATE "C" PRIMARY KEY,
    task_id         text COLLATE "C" NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    service         text NOT NULL,
    credential_type text NOT NULL,
    instructions    text NOT NULL,
    vault_ref       text NOT NULL,
    message_id      text,
    created_at      text NOT NULL,
    expires_at      text NOT NULL,
    status          text NOT NULL DEFAULT 'pending',
    step            bigint,
    received_at     text,
    received_by     text
);
CREATE INDEX idx_pending_credentials_status ON pending_credentials(status);
CREATE INDEX idx_pending_credentials_task ON pending_credentials(task_id);
CREATE TABLE adapter_state (
    adapter     text PRIMARY KEY,
    state_json  jsonb NOT NULL,
    updated_at  text NOT NULL
);
CREATE TABLE inbound_events (
    event_id    text COLLATE "C" PRIMARY KEY,
    adapter     text NOT NULL,
    task_id     text COLLATE "C",
    received_at text NOT NULL
);
CREATE INDEX idx_inbound_events_received ON inbound_events(received_at);
CREATE SEQUENCE owner_outbox_seq;
CREATE TABLE owner_outbox (
    message_key  text COLLATE "C" PRIMARY KEY,
    seq          bigint NOT NULL,
    sink         text NOT NULL,
    kind         text NOT NULL,
    task_id      text COLLATE "C",
    body         text NOT NULL,
    created_at   text NOT NULL,
    status       text NOT NULL DEFAULT 'pending',
    delivered_at text
);
CREATE INDEX idx_owner_outbox_pending ON owner_outbox(seq) WHERE status = 'pending';
CREATE UNIQUE INDEX idx_owner_outbox_seq ON owner_outbox(seq);
CREATE INDEX idx_owner_outbox_task ON owner_outbox(task_id);
CREATE TABLE kernel_boots (
    boot_id     text COLLATE "C" PRIMARY KEY,
    pid         bigint NOT NULL,
    version     text NOT NULL,
    started_at  text NOT NULL,
    ended_at    text,
    clean       integer NOT NULL DEFAULT 0
);
CREATE INDEX idx_kernel_boots_started ON kernel_boots(started_at);
CREATE TABLE sessions (
    session_id   text COLLATE "C" PRIMARY KEY,
    project_path text NOT NULL,
    thread_id    text NOT NULL,
    status       text NOT NULL
        CHECK (status IN ('CREATED', 'ACTIVE', 'PAUSED', 'TERMINATED')),
    context      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(context) = 'object'),
    created_at   text NOT NULL,
    updated_at   text NOT NULL,
    process_json jsonb CHECK (process_json IS NULL OR status = 'ACTIVE')
);
CREATE INDEX idx_sessions_status ON sessions(status);
CREATE UNIQUE INDEX idx_sessions_live_thread ON sessions(thread_id)
    WHERE status != 'TERMINATED';
CREATE TABLE llm_calls (
    call_id       bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id       text COLLATE "C" NOT NULL,
    provider      text NOT NULL,
    model         text NOT NULL,
    input_tokens  bigint NOT NULL,
    output_tokens bigint NOT NULL,
    time_to_first_token double precision,
    total_time    double precision NOT NULL,
    cost_usd      double precision NOT NULL,
    queued_seconds double precision NOT NULL,
    granted_at    double precision NOT NULL DEFAULT 0,
    at            text NOT NULL
);
CREATE INDEX idx_llm_calls_task ON llm_calls(task_id);
CREATE TABLE loop_tasks (
    task_id         text COLLATE "C" PRIMARY KEY REFERENCES task_journal(task_id) ON DELETE CASCADE,
    settings_json   jsonb NOT NULL,
    parent_task_id  text COLLATE "C"
);
CREATE INDEX idx_loop_tasks_parent ON loop_tasks(parent_task_id) WHERE parent_task_id IS NOT NULL;
CREATE TABLE loop_turns (
    task_id     text COLLATE "C" NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    seq         bigint NOT NULL,
    kind        text NOT NULL,
    body_json   jsonb NOT NULL,
    at          text NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE permission_rules (
    tool        text NOT NULL,
    pattern     text NOT NULL,
    decision    text NOT NULL CHECK (decision IN ('allow', 'deny')),
    task_id     text COLLATE "C",
    created_at  text NOT NULL,
    PRIMARY KEY (tool, pattern)
);
CREATE TABLE seen_hosts (
    host        text PRIMARY KEY,
    task_id     text COLLATE "C" NOT NULL,
    step        bigint NOT NULL,
    at          text NOT NULL
);
CREATE TABLE loop_anomalies (
    task_id     text COLLATE "C" NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    step        bigint NOT NULL,
    kind        text NOT NULL,
    detail      text NOT NULL,
    at          text NOT NULL,
    PRIMARY KEY (task_id, step, kind)
);
CREATE TABLE channels (
    name        text PRIMARY KEY,
    enabled     integer NOT NULL,
    updated_at  text NOT NULL
);
CREATE TABLE channel_outbox (
    channel      text NOT NULL,
    message_key  text COLLATE "C" NOT NULL,
    seq          bigint NOT NULL,
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'sending', 'sent', 'in_doubt', 'failed', 'superseded')),
    remote_id    text,
    attempts     bigint NOT NULL DEFAULT 0,
    not_before   text,
    last_error   text,
    updated_at   text NOT NULL,
    PRIMARY KEY (channel, message_key)
);
CREATE INDEX idx_channel_outbox_pending ON channel_outbox(channel, seq) WHERE status = 'pending';
CREATE INDEX idx_channel_outbox_remote ON channel_outbox(channel, remote_id)
    WHERE remote_id IS NOT NULL;
-- numbered in commit order: a transaction appends events only under the journal's
-- write lock (postgres/dialect.py), so a reader of seq > N never misses one that
-- commits later with a lower number; a rolled-back transaction leaves a gap
CREATE TABLE bus_events (
    seq       bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    kind      text NOT NULL,
    task_id   text COLLATE "C",
    body_json jsonb NOT NULL,
    at        text NOT NULL
);
CREATE INDEX bus_events_at ON bus_events(at);
CREATE INDEX bus_events_task ON bus_events(task_id, seq);
CREATE TABLE bus_offsets (
    subscriber text PRIMARY KEY,
    seq        bigint NOT NULL,
    updated_at text NOT NULL
);
CREATE TABLE hook_verdicts (
    task_id      text COLLATE "C" NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    key          text NOT NULL,
    verdict_json jsonb NOT NULL,
    at           text NOT NULL,
    PRIMARY KEY (task_id, key)
);
CREATE TABLE resource_locks (
    kind        text NOT NULL,
    name        text NOT NULL,
    holder      text NOT NULL,
    mode        text NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    task_id     text COLLATE "C" NOT NULL,
    boot_id     text NOT NULL,
    host        text NOT NULL,
    pid         bigint NOT NULL,
    pid_started bigint NOT NULL,
    lease_until text NOT NULL,
    acquired_at text NOT NULL,
    PRIMARY KEY (kind, name, holder)
);
CREATE INDEX resource_locks_holder ON resource_locks(holder);
CREATE INDEX resource_locks_boot ON resource_locks(boot_id);
CREATE TABLE lock_waits (
    holder   text PRIMARY KEY,
    task_id  text COLLATE "C" NOT NULL,
    boot_id  text NOT NULL,
    reason   text NOT NULL,
    since    text NOT NULL
)
