-- Cancelled is a terminal state: the partial index of unfinished tasks leaves it out,
-- so recovery's cost keeps growing with unfinished work only.
DROP INDEX idx_task_journal_unfinished;
CREATE INDEX idx_task_journal_unfinished ON task_journal(task_id)
    WHERE state NOT IN ('Completed', 'Failed', 'Abandoned', 'Cancelled');
