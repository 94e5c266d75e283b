SELECT drain_id, started_at, updated_at, actor, account, then_action, state, ack_pending_start,
       ack_pending_now, message
FROM drains
WHERE stream = $stream AND consumer = $consumer
ORDER BY started_at DESC
LIMIT 5;
