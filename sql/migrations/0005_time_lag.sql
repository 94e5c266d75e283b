-- Migration 5: time lag and drain ETA.
-- The age of each consumer's oldest unacknowledged message (the first one after the ack floor that
-- its filter matches) and of its oldest undelivered one (after the delivered sequence), in seconds
-- at the sample's time; `_kind` says how it was found: 'exact' (the message's timestamp read from
-- the stream) or 'estimate' (interpolated from the stream's sequence/time history, when the
-- collector may not read messages or a read was not due). NULL: nothing unacknowledged/undelivered.
ALTER TABLE samples ADD COLUMN IF NOT EXISTS oldest_unacked_age_seconds DOUBLE;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS oldest_unacked_age_kind VARCHAR;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS oldest_undelivered_age_seconds DOUBLE;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS oldest_undelivered_age_kind VARCHAR;
ALTER TABLE consumer_current ADD COLUMN IF NOT EXISTS oldest_unacked_age_seconds DOUBLE;
ALTER TABLE consumer_current ADD COLUMN IF NOT EXISTS oldest_unacked_age_kind VARCHAR;
ALTER TABLE consumer_current ADD COLUMN IF NOT EXISTS oldest_undelivered_age_seconds DOUBLE;
ALTER TABLE consumer_current ADD COLUMN IF NOT EXISTS oldest_undelivered_age_kind VARCHAR;

-- The drain ETA judged with each verdict: `eta_state` is 'draining' (then eta_seconds, with the
-- range eta_low_seconds..eta_high_seconds; high NULL when the slowest rate the trend allows does
-- not drain), 'not draining', 'paused' or 'no pullers'; NULL where an ETA means nothing (a push
-- consumer, or no backlog).
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS eta_state VARCHAR;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS eta_seconds DOUBLE;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS eta_low_seconds DOUBLE;
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS eta_high_seconds DOUBLE;

-- The pipeline keeps the largest age seen per minute and per hour.
ALTER TABLE rollups ADD COLUMN IF NOT EXISTS oldest_unacked_age_max_seconds DOUBLE;
ALTER TABLE rollups ADD COLUMN IF NOT EXISTS oldest_undelivered_age_max_seconds DOUBLE;
