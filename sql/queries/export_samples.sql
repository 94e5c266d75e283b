-- Raw samples of one export window, with the partition columns of the Parquet layout.
SELECT account, stream, consumer, ts, created, num_pending, num_ack_pending, num_waiting,
       num_redelivered, delivered_consumer_seq, delivered_stream_seq, ack_floor_consumer_seq,
       ack_floor_stream_seq, paused, pinned_id, oldest_unacked_age_seconds, oldest_undelivered_age_seconds,
       delivered_last_active, ack_floor_last_active,
       strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%d') AS date,
       CAST(hour(ts AT TIME ZONE 'UTC') AS INTEGER) AS hour
FROM samples
WHERE ts >= $since AND ts < $until;
