-- The silences not ended yet (the collector ends them; one past its expiry ends with its next
-- cycle, and every reader treats it as ended from `expires_at` on), newest first.
SELECT silence_id, account, stream, consumer, verdict AS silenced_verdict, level AS silenced_level,
       note AS silence_note, actor AS silenced_by, created_at AS silenced_at, expires_at AS silenced_until
FROM silences
WHERE ended_at IS NULL
ORDER BY created_at DESC;
