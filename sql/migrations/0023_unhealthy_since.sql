-- Migration 23: since when each consumer has been unhealthy without a break (health/easing.py
-- `unhealthy_since`): a run of verdicts that moves between STALLED, LOSING, NO_PULLERS ... keeps one
-- start; NULL while it is OK, COLLECTING or PAUSED.
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS unhealthy_since TIMESTAMPTZ;
