-- Seconds each consumer spent with work pending and no pinned client, from samples (each
-- sample stands for the interval until the next one); the same time weighted by the age of the
-- oldest unacknowledged message then (each second counted once per hour that message had waited:
-- an hour with nobody pinned while the oldest job was two hours old counts 7,200), and the oldest
-- age seen while nobody was pinned.
SELECT account, stream, consumer,
       sum(CASE WHEN nopin THEN epoch(next_ts) - epoch(ts) ELSE 0 END) AS nopin_pending_seconds,
       sum(CASE WHEN nopin THEN (epoch(next_ts) - epoch(ts)) * coalesce(age, 0) / 3600 ELSE 0 END)
         AS nopin_age_weighted_seconds,
       max(CASE WHEN pinned_id IS NULL AND num_pending > 0 THEN age END) AS nopin_oldest_age_seconds
FROM (
    SELECT account, stream, consumer, ts, pinned_id, num_pending, oldest_unacked_age_seconds AS age,
           lead(ts) OVER (PARTITION BY account, stream, consumer ORDER BY ts) AS next_ts,
           pinned_id IS NULL AND num_pending > 0 AND next_ts IS NOT NULL AS nopin
    FROM samples
    WHERE ts >= $since AND ts <= $until AND pin_group IS NOT NULL
)
GROUP BY ALL;
