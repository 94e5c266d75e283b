-- Migration 10: verdicts ease only after their cause has been gone for --clear-after. Since when a
-- calmer verdict than the kept one has been judged (NULL: none), kept with the verdict so that a
-- restarted collector goes on counting instead of starting over.
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS calmer_since TIMESTAMPTZ;
