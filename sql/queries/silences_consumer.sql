-- One consumer's silences, open and ended, newest first (the Consumer page: the one that holds,
-- and how the earlier ones ended), in silences_open.sql's names.
SELECT silence_id, account, stream, consumer, verdict AS silenced_verdict, level AS silenced_level,
       note AS silence_note, actor AS silenced_by, created_at AS silenced_at, expires_at AS silenced_until,
       ended_at, end_reason
FROM silences
WHERE account = $account AND stream = $stream AND consumer = $consumer
ORDER BY created_at DESC
LIMIT $limit;
