-- Samples of the health window for the consumers in the live state, as the relation
-- `window_samples` that the collector seeds its window from (health/window.py): a view, so the features query scans the
-- store file directly (the ts filter prunes by zone maps) and nothing is copied out first.
-- Run set_window_since first.
CREATE OR REPLACE TEMP VIEW window_samples AS
SELECT s.account, s.stream, s.consumer, s.ts, s.created, s.num_pending, s.num_ack_pending,
       s.num_waiting, s.num_redelivered, s.delivered_consumer_seq, s.delivered_stream_seq,
       s.ack_floor_stream_seq, s.paused, s.pinned_id,
       s.oldest_unacked_age_seconds, s.time_to_loss_seconds, s.delivered_last_active, s.ack_floor_last_active
FROM samples s
SEMI JOIN consumer_current c USING (account, stream, consumer)
WHERE s.ts >= getvariable('window_since');
