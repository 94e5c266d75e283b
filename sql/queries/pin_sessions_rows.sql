-- The pin sessions of the range (stage_pin_sessions_range), newest end first, at most $limit; with
-- $search (NULL: any), those of consumers whose stream or consumer name holds it (any case); with
-- $reasons (empty: any), those of consumers unpinned in the range for one of them ('inferred': an
-- unpin seen in samples).
WITH r AS (SELECT unnest(getvariable('pin_range'))),
unpinned AS (
    SELECT DISTINCT e.account, e.stream, e.consumer
    FROM pin_events e, r
    WHERE e.event = 'unpinned' AND e.ts >= r.since AND e.ts <= r.until
      AND list_contains($reasons::VARCHAR[], CASE WHEN e.source = 'inferred' THEN 'inferred' ELSE e.reason END)
)
SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts, duration_seconds, end_reason,
       gap_seconds, ongoing
FROM pin_sessions_in_range s
WHERE ($search IS NULL OR contains(lower(s.stream), lower($search)) OR contains(lower(s.consumer), lower($search)))
  AND (len($reasons::VARCHAR[]) = 0 OR (s.account, s.stream, s.consumer) IN (SELECT (account, stream, consumer) FROM unpinned))
ORDER BY end_ts DESC, start_ts DESC NULLS LAST, account, stream, consumer
LIMIT $limit;
