-- The newest pin history rows of the range (pin events and consumer deletions), at most $limit,
-- newest first; $search and $reasons choose consumers as stage_pin_rows_chosen does. At one instant a
-- deletion comes first, then an unpin, then a pin. Without $reasons, the rows are read from the
-- time the $limit-th newest advisory or inferred event holds on (each table's own newest, found
-- by its time order), so a long range does not join every advisory of it to its confirmation.
WITH unpinned AS (
    SELECT DISTINCT account, stream, consumer
    FROM (SELECT account, stream, consumer, end_ts, end_reason FROM pin_sessions_rolled
          UNION ALL SELECT account, stream, consumer, end_ts, end_reason FROM pin_sessions_live)
    WHERE len($reasons::VARCHAR[]) > 0 AND end_ts >= $since AND list_contains($reasons::VARCHAR[], end_reason)
),
named AS (
    SELECT ts FROM advisories
    WHERE kind IN ('consumer_group_pinned', 'consumer_group_unpinned', 'consumer_action') AND ts >= $since AND ts <= $until
      AND ($search IS NULL OR contains(lower(stream), lower($search)) OR contains(lower(consumer), lower($search)))
    ORDER BY ts DESC LIMIT $limit
),
inferred AS (
    SELECT ts FROM inferred_pin_events
    WHERE ts >= $since AND ts <= $until
      AND ($search IS NULL OR contains(lower(stream), lower($search)) OR contains(lower(consumer), lower($search)))
    ORDER BY ts DESC LIMIT $limit
),
floor_ts AS (
    SELECT CASE WHEN len($reasons::VARCHAR[]) > 0 THEN $since::TIMESTAMPTZ
                ELSE greatest($since::TIMESTAMPTZ, least((SELECT min(ts) FROM named), (SELECT min(ts) FROM inferred))) END AS ts
)
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM pin_session_events e
WHERE ts >= coalesce((SELECT ts FROM floor_ts), $since) AND ts <= $until
  AND ($search IS NULL OR contains(lower(e.stream), lower($search)) OR contains(lower(e.consumer), lower($search)))
  AND (len($reasons::VARCHAR[]) = 0 OR EXISTS (SELECT 1 FROM unpinned u WHERE u.account = e.account
                                               AND u.stream = e.stream AND u.consumer = e.consumer))
ORDER BY ts DESC, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END DESC, account, stream, consumer
LIMIT $limit;
