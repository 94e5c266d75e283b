-- The pin an unpin at $ts ended (the consumer's last pin at or before it) and the connection its holder
-- announced, if any.
SELECT p.pinned_id, h.client_id, h.server_id
FROM pin_events p LEFT JOIN pin_holders h ON h.pin_id = p.pinned_id AND h.account IS NOT DISTINCT FROM p.account AND h.stream = p.stream
          AND h.consumer = p.consumer
WHERE p.event = 'pinned' AND p.account = $account AND p.stream = $stream AND p.consumer = $consumer AND p.ts <= $ts::TIMESTAMPTZ
ORDER BY p.ts DESC
LIMIT 1;
