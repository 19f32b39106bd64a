-- Schema 14, as SQLite's sessions_0014: each start's recovery report kept with its boot
-- (jsonb), and indexes for per-day activity over a window of days.
ALTER TABLE kernel_boots ADD COLUMN report_json jsonb;
CREATE INDEX idx_llm_calls_at ON llm_calls(at);
CREATE INDEX idx_task_journal_created ON task_journal(created_at, task_id);
-- the task list a page at a time, newest first, by state or by template; the index by
-- state and creation replaces the one by state alone, which every move kept up too
DROP INDEX idx_task_journal_state;
CREATE INDEX idx_task_journal_state_created ON task_journal(state, created_at, task_id);
CREATE INDEX idx_task_journal_template_created ON task_journal(template_id, created_at, task_id);
CREATE INDEX idx_task_steps_started_at ON task_steps(started_at);
