-- Migration 17: each consumer's waits for a pull, kept beside its verdict (health/pull_rhythm.py),
-- so that a batch consumer's rhythm, longer than the health window, survives a restart.
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS pull_wait_last DOUBLE;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS pull_wait_prev DOUBLE;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS pull_wait_ended TIMESTAMPTZ;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS pull_waits_in_row INTEGER;
