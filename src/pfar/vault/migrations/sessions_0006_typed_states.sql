-- Each task row names the runner that advances it; before this, a traced workflow was
-- told apart by its template id. The state payloads are rewritten as typed records
-- with a `kind` tag in the same transaction (vault/upgrades.py, typed_states).
ALTER TABLE task_journal ADD COLUMN kind TEXT NOT NULL DEFAULT 'pipeline';
-- (substr, not LIKE: LIKE ignores case, and a workflow's template id is exactly this prefix)
UPDATE task_journal SET kind = 'workflow' WHERE substr(template_id, 1, 9) = 'workflow:';
CREATE INDEX idx_task_journal_kind ON task_journal(kind, created_at);
