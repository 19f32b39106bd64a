-- Whether a model call's cost is known: 0 when its model had no price (neither pfar's
-- table nor [llm.prices] named it), so its cost_usd of 0 is "unknown", not "free", and
-- `pfar costs` can say which models those were. Calls made before are taken as priced,
-- as they were shown.
ALTER TABLE llm_calls ADD COLUMN priced INTEGER NOT NULL DEFAULT 1;
