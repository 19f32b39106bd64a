-- Resource locks (seed 001, 4.3 and "Lock Recovery"): what a task's tool call holds
-- (a file shared or exclusive, a repository, a host), with who holds it: the kernel's
-- boot, host, pid and the pid's start time (a pid reused by another process is not
-- the holder), and a lease the holding kernel renews. A lock whose holder process is
-- gone is stale and taken; one of a live holder elsewhere is waited on until its lease
-- expires. No foreign key to the task: a lock outlives nothing but its holder.
CREATE TABLE resource_locks (
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    holder      TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    task_id     TEXT NOT NULL,
    boot_id     TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    pid_started INTEGER NOT NULL,
    lease_until TEXT NOT NULL,
    acquired_at TEXT NOT NULL,
    PRIMARY KEY (kind, name, holder)
) WITHOUT ROWID;
CREATE INDEX resource_locks_holder ON resource_locks(holder);
CREATE INDEX resource_locks_boot ON resource_locks(boot_id);

-- Tool calls waiting for a lock, as `pfar tasks` shows them (display only: a wait ends
-- by itself within the lock timeout, and a crash ends it; rows of earlier boots are
-- dropped at start).
CREATE TABLE lock_waits (
    holder   TEXT PRIMARY KEY,
    task_id  TEXT NOT NULL,
    boot_id  TEXT NOT NULL,
    reason   TEXT NOT NULL,
    since    TEXT NOT NULL
) WITHOUT ROWID;
