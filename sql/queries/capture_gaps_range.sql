-- Gaps in the advisory record that touch [$since, $until] (an open end counts as touching):
-- pin history is incomplete between from_ts and to_ts.
SELECT detected_at, stream, from_seq, to_seq, missed, from_ts, to_ts, reason
FROM capture_gaps
WHERE coalesce(to_ts, detected_at) >= $since AND coalesce(from_ts, detected_at) <= $until
ORDER BY coalesce(from_ts, detected_at) DESC
LIMIT 20;
