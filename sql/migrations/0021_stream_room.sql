-- Migration 21: room before a full stream refuses publishes. Messages a stream with discard new still
-- takes before max_msgs or max_bytes refuses them (health/loss.py; max_bytes in messages of the
-- stream's mean size); under 1: full, every publish refused; NULL: discard old, no count or size limit, or
-- not read.
ALTER TABLE samples_recent ADD COLUMN IF NOT EXISTS stream_room_messages DOUBLE;
ALTER TABLE samples_sealed ADD COLUMN IF NOT EXISTS stream_room_messages DOUBLE;
ALTER TABLE current_held ADD COLUMN IF NOT EXISTS stream_room_messages DOUBLE;
