INSERT INTO rollups BY NAME
SELECT granularity, bucket, account, stream, consumer, samples, pending_min, pending_mean, pending_max,
       pending_p95, ack_pending_min, ack_pending_mean, ack_pending_max, ack_pending_p95, waiting_min,
       waiting_mean, waiting_max, waiting_p95, delivered_per_second, acked_per_second,
       redelivered_per_second, saturated_fraction, oldest_unacked_age_max_seconds,
       oldest_undelivered_age_max_seconds
FROM rollup_batch
WHERE bucket >= $since AND bucket < $until;
