-- Messages dropped by a consumer of $account not read yet (or whose read was refused before
-- $retry_before), newest first (the newest are the likeliest still in the stream), at most $limit:
-- the reads a collector makes in one pass.
SELECT stream, stream_seq, max(ts) AS ts
FROM dropped_messages
WHERE account = $account
  AND (read_state IS NULL OR (read_state = 'refused' AND read_at < $retry_before))
GROUP BY stream, stream_seq
ORDER BY ts DESC, stream, stream_seq
LIMIT $limit;
