-- Audit rows become an append-only, hash-chained log: every action writes an intent
-- row before it sends anything and an outcome row after, both under one action_id; each row
-- carries the hash of the row before it, so an edited, inserted or removed row breaks the chain
-- (`jetwatch audit verify`). Rows written before this step keep NULL here and stay outside it.
ALTER TABLE audit ADD COLUMN seq BIGINT;
ALTER TABLE audit ADD COLUMN action_id VARCHAR;
ALTER TABLE audit ADD COLUMN phase VARCHAR;
ALTER TABLE audit ADD COLUMN prev_hash VARCHAR;
ALTER TABLE audit ADD COLUMN row_hash VARCHAR;

-- Pin advisories can be published by any user of the account, so a PINNED advisory is only as
-- good as sampled state agrees with it: the collector decides once per advisory whether its pin
-- id showed up in a sample (confirmed) or not within the grace period (unconfirmed).
CREATE TABLE IF NOT EXISTS pin_confirmations (
    advisory_id  VARCHAR PRIMARY KEY,
    status       VARCHAR NOT NULL,
    decided_at   TIMESTAMPTZ NOT NULL
);
