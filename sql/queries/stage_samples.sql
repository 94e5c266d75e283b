-- One cycle's samples, typed, over the registered Arrow table `batch` (a view: read twice, never copied).
-- Its times come parsed (store/writes.py), or as text where Arrow cannot parse them: cast here.
CREATE OR REPLACE TEMP VIEW cycle_samples AS
SELECT ts::TIMESTAMPTZ AS ts, server, cluster, domain, account, stream, consumer,
       created::TIMESTAMPTZ AS created, num_pending, num_ack_pending, num_waiting, num_redelivered,
       delivered_consumer_seq, delivered_stream_seq,
       delivered_last_active::TIMESTAMPTZ AS delivered_last_active,
       ack_floor_consumer_seq, ack_floor_stream_seq,
       ack_floor_last_active::TIMESTAMPTZ AS ack_floor_last_active,
       paused, pause_until::TIMESTAMPTZ AS pause_until, pin_group, pinned_id,
       pinned_ts::TIMESTAMPTZ AS pinned_ts, leader,
       oldest_unacked_age_seconds, oldest_unacked_age_kind,
       oldest_undelivered_age_seconds, oldest_undelivered_age_kind, time_to_loss_seconds,
       loss_limit, stream_room_messages
FROM batch;
