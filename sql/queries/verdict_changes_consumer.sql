-- One consumer's verdict transitions in a range, plus the last one before it (the band's start).
SELECT ts, from_verdict, to_verdict, reason
FROM verdict_changes
WHERE account = $account AND stream = $stream AND consumer = $consumer
  AND ts >= coalesce((SELECT max(ts) FROM verdict_changes
                      WHERE account = $account AND stream = $stream AND consumer = $consumer AND ts < $since),
                     $since)
  AND ts <= $until
ORDER BY ts;
