-- The pipeline's pin sessions overlapping a range.
SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts, duration_seconds,
       end_reason, gap_seconds
FROM pin_sessions
WHERE coalesce(end_ts, $until) >= $since AND start_ts <= $until
ORDER BY account, stream, consumer, start_ts;
