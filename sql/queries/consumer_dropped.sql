-- One consumer's dropped messages, newest first.
SELECT ts, dropped_by, stream_seq, consumer_seq, deliveries, reason, read_state, message_subject,
       message_time, read_note
FROM dropped_messages
WHERE account = $account AND stream = $stream AND consumer = $consumer
ORDER BY ts DESC, stream_seq DESC
LIMIT $limit;
