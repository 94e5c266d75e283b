-- The open silences with their consumers' verdicts as just kept: the collector ends those that
-- expired or whose verdict turned into another that alerts (health/silences.py).
SELECT s.silence_id, s.account, s.stream, s.consumer, s.verdict AS silenced_verdict, s.level AS silenced_level,
       s.note AS silence_note, s.actor AS silenced_by, s.created_at AS silenced_at, s.expires_at AS silenced_until,
       v.verdict
FROM silences s
LEFT JOIN verdicts_current v USING (account, stream, consumer)
WHERE s.ended_at IS NULL
ORDER BY s.created_at DESC;
