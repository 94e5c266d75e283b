-- Migration 9: the live state is the latest cycle's rows in samples_recent, not a copy.
-- consumer_current was a table written whole every cycle (every consumer's row deleted and
-- inserted again beside the samples: a large part of the collector's write). Now each
-- cycle's rows carry the cycle's number, `current_cycle` holds the latest, and the view
-- `consumer_current` (sql/views.sql) is those rows plus `current_held`: the last known rows of
-- what the latest cycle did not read (a stream whose listing failed, a rejected entry, an account
-- not sampled), copied there by the cycle that left them out. Sealing and retention leave the
-- current cycle's rows where they are. `cycle` is NULL on rows written before this step, and
-- not a column of the view `samples`.
ALTER TABLE samples_recent ADD COLUMN IF NOT EXISTS cycle BIGINT;

CREATE TABLE IF NOT EXISTS current_cycle (cycle BIGINT NOT NULL);
INSERT INTO current_cycle SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM current_cycle);

-- The live state as the table held it: shown as it was until the next cycle replaces it.
CREATE TABLE IF NOT EXISTS current_held AS SELECT * FROM consumer_current;
DROP TABLE consumer_current;
