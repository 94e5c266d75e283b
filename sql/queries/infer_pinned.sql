-- Records a pin that sampled state shows and no advisory reported (it happened before
-- collection began, or while no capture was possible).
INSERT OR IGNORE INTO inferred_pin_events
WITH unexplained AS (
    SELECT c.account, c.stream, c.consumer, c.pin_group, c.pinned_id, c.pinned_ts
    FROM consumer_current c
    WHERE c.pinned_id IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM pin_events p
          WHERE p.account = c.account AND p.stream = c.stream AND p.consumer = c.consumer
            AND p.event = 'pinned' AND p.pinned_id = c.pinned_id)
),
first_seen AS (
    SELECT u.*, (SELECT min(s.ts) FROM samples s
                 WHERE s.ts > $horizon AND s.account = u.account AND s.stream = u.stream
                   AND s.consumer = u.consumer AND s.pinned_id = u.pinned_id) AS seen
    FROM unexplained u
)
SELECT md5(concat_ws(chr(31), 'pinned', account, stream, consumer, pinned_id)) AS id,
       coalesce(pinned_ts, seen) AS ts, $now AS recorded_at, account, stream, consumer,
       pin_group AS group_name, 'pinned' AS event, pinned_id, NULL AS closes_id,
       'sampled state shows a pin no advisory reported' AS why
FROM first_seen
WHERE seen <= $cutoff;
