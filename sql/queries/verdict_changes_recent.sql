-- The latest verdict transitions, newest first.
SELECT ts, account, stream, consumer, from_verdict, to_verdict, reason
FROM verdict_changes
ORDER BY ts DESC
LIMIT $limit;
