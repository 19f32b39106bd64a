-- Layer 3 of the agentic loop's security (anomaly checks): the hosts tools have reached
-- (one row per host, not per call), and what was found unusual about a tool call, kept
-- so that a call looked at again after a crash is judged as it was the first time.
CREATE TABLE seen_hosts (
    host        TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL,
    step        INTEGER NOT NULL,
    at          TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE loop_anomalies (
    task_id     TEXT NOT NULL REFERENCES task_journal(task_id) ON DELETE CASCADE,
    step        INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    detail      TEXT NOT NULL,
    at          TEXT NOT NULL,
    PRIMARY KEY (task_id, step, kind)
) WITHOUT ROWID;
