-- The newest pin history rows of the range (pin events and consumer deletions), at most $limit,
-- newest first; $search and $reasons choose consumers as in pin_sessions_rows. At one instant a
-- deletion comes first, then an unpin, then a pin.
WITH unpinned AS (
    SELECT DISTINCT account, stream, consumer
    FROM pin_events
    WHERE event = 'unpinned' AND ts >= $since AND ts <= $until
      AND list_contains($reasons::VARCHAR[], CASE WHEN source = 'inferred' THEN 'inferred' ELSE reason END)
)
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM pin_session_events e WHERE ts >= $since AND ts <= $until
  AND ($search IS NULL OR contains(lower(e.stream), lower($search)) OR contains(lower(e.consumer), lower($search)))
  AND (len($reasons::VARCHAR[]) = 0 OR (e.account, e.stream, e.consumer) IN (SELECT (account, stream, consumer) FROM unpinned))
ORDER BY ts DESC, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END DESC, account, stream, consumer
LIMIT $limit;
