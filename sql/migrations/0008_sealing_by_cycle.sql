-- Migration 8: sealing judged on the collector's clock, and samples_sealed as strict as
-- samples_recent.
-- `sampled_at` is the collector's time of the cycle that read a row: a sealing pass takes the
-- rows of the oldest --seal-every of cycles, whatever the servers' clocks say. (Judged on the
-- samples' own times, one server whose clock was minutes ahead or behind kept every pass due, and
-- each cycle sealed a few rows: more work, and each consumer's rows split into many short runs.)
-- NULL on rows written before this step: those are judged on their own `ts`. Not a column of the
-- view `samples`.
ALTER TABLE samples_recent ADD COLUMN IF NOT EXISTS sampled_at TIMESTAMPTZ;

-- Migration 7 made samples_sealed from a query, which keeps no constraints or defaults.
ALTER TABLE samples_sealed ALTER COLUMN cid SET NOT NULL;
ALTER TABLE samples_sealed ALTER COLUMN ts SET NOT NULL;
ALTER TABLE samples_sealed ALTER COLUMN account SET NOT NULL;
ALTER TABLE samples_sealed ALTER COLUMN stream SET NOT NULL;
ALTER TABLE samples_sealed ALTER COLUMN consumer SET NOT NULL;
ALTER TABLE samples_sealed ALTER COLUMN paused SET NOT NULL;
ALTER TABLE samples_sealed ALTER COLUMN paused SET DEFAULT false;
