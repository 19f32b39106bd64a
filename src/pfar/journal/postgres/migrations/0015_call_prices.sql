-- Schema 15, as SQLite's sessions_0015: whether a model call's cost is known (0 when
-- its model had no price, so its cost_usd of 0 means "unknown", not "free").
ALTER TABLE llm_calls ADD COLUMN priced integer NOT NULL DEFAULT 1;
