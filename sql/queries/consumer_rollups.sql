-- The pipeline's rollups for one consumer, for ranges too long for raw samples.
SELECT bucket AS ts, pending_mean AS num_pending, ack_pending_mean AS num_ack_pending,
       waiting_mean AS num_waiting, pending_max, ack_pending_max, waiting_max,
       delivered_per_second, acked_per_second, redelivered_per_second,
       oldest_unacked_age_max_seconds AS oldest_unacked_age_seconds,
       oldest_undelivered_age_max_seconds AS oldest_undelivered_age_seconds
FROM rollups
WHERE granularity = $granularity AND account = $account AND stream = $stream
  AND consumer = $consumer AND bucket >= $since AND bucket <= $until
ORDER BY bucket;
