-- Whether a model call's cost is known: 0 when its model had no price (neither pfar's
-- table nor [llm.prices] named it), so its cost_usd of 0 is "unknown", not "free", and
-- `pfar costs` can say which models those were. Calls made before are taken as priced,
-- as they were shown.
ALTER TABLE llm_calls ADD COLUMN priced INTEGER NOT NULL DEFAULT 1;
-- Model calls summed by UTC day, kept up in the commit of each call (step_writes.py):
-- a day's or a month's spend cap reads a row a day, not every call of the month. Kept
-- when the calls' tasks are pruned: what was spent was spent.
CREATE TABLE llm_spend_days (
    day           TEXT PRIMARY KEY,
    calls         INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd      REAL NOT NULL,
    unpriced      INTEGER NOT NULL
);
INSERT INTO llm_spend_days
SELECT substr(at, 1, 10), count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd), 0
FROM llm_calls GROUP BY substr(at, 1, 10);
