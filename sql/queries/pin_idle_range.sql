-- The stretches each consumer was PIN_IDLE (its pinned client held the pin and pulled nothing
-- while work and another client's pull waited) that overlap a time range: from the change that
-- named it to the change that ended it (the range's end while it lasts), for the Pins timeline's
-- marks on the holder's bar. Named, not begun: the verdict's since (its onset) is up to
-- --pin-idle-after earlier.
WITH changes AS (
    SELECT account, stream, consumer, ts, to_verdict,
           lead(ts) OVER (PARTITION BY account, stream, consumer ORDER BY ts) AS next_ts
    FROM verdict_changes
    WHERE ts <= $until
)
SELECT account, stream, consumer, ts AS start_ts, coalesce(next_ts, $until) AS end_ts, next_ts IS NULL AS ongoing
FROM changes
WHERE to_verdict = 'PIN_IDLE' AND coalesce(next_ts, $until) >= $since
ORDER BY start_ts;
