-- What `jetwatch check` reads of each consumer: its kept verdict, its level and when it was judged,
-- with the newest silence not ended beside it (health/silences.py says whether it still holds).
SELECT v.account, v.stream, v.consumer, v.verdict, v.level, v.judged_at,
       s.silenced_verdict, s.silenced_by, s.silenced_until, s.silence_note
FROM verdicts_current v
LEFT JOIN (SELECT account, stream, consumer, verdict AS silenced_verdict, actor AS silenced_by,
                  expires_at AS silenced_until, note AS silence_note
           FROM silences
           WHERE ended_at IS NULL
           QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY created_at DESC) = 1) s
       ON s.account IS NOT DISTINCT FROM v.account AND s.stream = v.stream AND s.consumer = v.consumer;
