SELECT ts, kind, group_name, pinned_id, reason, raw
FROM advisories
WHERE account = $account AND stream = $stream AND consumer = $consumer
  AND ts >= $since AND ts <= $until
ORDER BY ts DESC
LIMIT 500;
