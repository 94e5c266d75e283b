-- Migration 11: time to data loss. Seconds until the stream's limits (max_age, max_msgs, max_bytes with
-- discard old) remove the consumer's oldest unacknowledged message, at the stream's arrival rate and
-- the rate its ack floor moves (health/loss.py); 0: they already have; NULL: no loss in sight, no
-- limits, or not projected yet.
ALTER TABLE samples_recent ADD COLUMN IF NOT EXISTS time_to_loss_seconds DOUBLE;
ALTER TABLE samples_sealed ADD COLUMN IF NOT EXISTS time_to_loss_seconds DOUBLE;
ALTER TABLE current_held ADD COLUMN IF NOT EXISTS time_to_loss_seconds DOUBLE;
