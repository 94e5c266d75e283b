-- Seconds each consumer spent with work pending and no pinned client, from samples (each
-- sample stands for the interval until the next one).
SELECT account, stream, consumer,
       sum(CASE WHEN pinned_id IS NULL AND num_pending > 0 AND next_ts IS NOT NULL
                THEN epoch(next_ts) - epoch(ts) ELSE 0 END) AS nopin_pending_seconds
FROM (
    SELECT account, stream, consumer, ts, pinned_id, num_pending,
           lead(ts) OVER (PARTITION BY account, stream, consumer ORDER BY ts) AS next_ts
    FROM samples
    WHERE ts >= $since AND ts <= $until AND pin_group IS NOT NULL
)
GROUP BY ALL;
