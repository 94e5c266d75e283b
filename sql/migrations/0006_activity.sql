-- Migration 6: each consumer's last activity, kept by the collector with its verdict.
-- When it last pulled (a pull request waiting, or the delivered sequence moved), when its ack
-- floor last moved, and the first sample the collector saw of it: the Fleet's "since when" for a
-- NO_PULLERS or STALLED consumer, read from one row per consumer instead of scanning samples.
-- NULL on rows written before this migration (the page then looks them up in the samples).
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS last_pull TIMESTAMPTZ;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS last_ack TIMESTAMPTZ;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS first_seen TIMESTAMPTZ;
