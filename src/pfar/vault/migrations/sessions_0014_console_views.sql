-- What the web console shows over time. Each start's recovery report, as the owner was
-- sent it, with the tasks each of its lines is about (JSON), kept with its boot: every
-- restart's report stays readable for as long as its boot is kept. And indexes for
-- per-day activity and the task list, so a chart over the last days reads those days and
-- a page of the list (by state or template too) reads that page, not all history.
ALTER TABLE kernel_boots ADD COLUMN report_json TEXT;
CREATE INDEX idx_llm_calls_at ON llm_calls(at);
CREATE INDEX idx_task_journal_created ON task_journal(created_at, task_id);
-- the task list a page at a time, newest first, by state or by template; the index by
-- state and creation replaces the one by state alone, which every move kept up too
DROP INDEX idx_task_journal_state;
CREATE INDEX idx_task_journal_state_created ON task_journal(state, created_at, task_id);
CREATE INDEX idx_task_journal_template_created ON task_journal(template_id, created_at, task_id);
CREATE INDEX idx_task_steps_started_at ON task_steps(started_at);
