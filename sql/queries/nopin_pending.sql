-- Seconds each consumer spent with work pending and no pinned client, from samples (each
-- sample stands for the interval until the next cycle's samples, the collector's next read); the same
-- time weighted by the age of the oldest unacknowledged message then (each second counted once per
-- hour that message had waited: an hour with nobody pinned while the oldest job was two hours old
-- counts 7,200), and the oldest age seen while nobody was pinned. The cycles' times are read once
-- for the range and joined to the samples with nobody pinned: no sort of every consumer's samples.
WITH cycles AS (
    SELECT ts, lead(ts) OVER (ORDER BY ts) AS next_ts
    FROM (SELECT DISTINCT ts FROM samples WHERE ts >= $since AND ts <= $until AND pin_group IS NOT NULL)
),
nopin AS (
    SELECT account, stream, consumer, ts, oldest_unacked_age_seconds AS age
    FROM samples
    WHERE ts >= $since AND ts <= $until AND pin_group IS NOT NULL AND pinned_id IS NULL AND num_pending > 0
)
SELECT n.account, n.stream, n.consumer,
       coalesce(sum(epoch(c.next_ts) - epoch(n.ts)), 0) AS nopin_pending_seconds,
       coalesce(sum((epoch(c.next_ts) - epoch(n.ts)) * coalesce(n.age, 0) / 3600), 0) AS nopin_age_weighted_seconds,
       max(n.age) AS nopin_oldest_age_seconds
FROM nopin n JOIN cycles c USING (ts)
GROUP BY ALL;
