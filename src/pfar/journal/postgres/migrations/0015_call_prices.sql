-- Schema 15, as SQLite's sessions_0015: whether a model call's cost is known (0 when
-- its model had no price, so its cost_usd of 0 means "unknown", not "free").
ALTER TABLE llm_calls ADD COLUMN priced integer NOT NULL DEFAULT 1;
-- model calls summed by UTC day, kept up in the commit of each call: what a day's or a
-- month's spend cap reads
CREATE TABLE llm_spend_days (
    day           text COLLATE "C" PRIMARY KEY,
    calls         bigint NOT NULL,
    input_tokens  bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cost_usd      double precision NOT NULL,
    unpriced      bigint NOT NULL
);
INSERT INTO llm_spend_days
SELECT substr(at, 1, 10), count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd), 0
FROM llm_calls GROUP BY substr(at, 1, 10);
