-- Per consumer: how many messages it dropped (retained advisories) and the newest $per_consumer of them.
SELECT account, stream, consumer, ts, dropped_by, stream_seq, consumer_seq, deliveries, reason,
       read_state, message_subject, message_time, read_note,
       count(*) OVER (PARTITION BY account, stream, consumer) AS dropped_count
FROM dropped_messages
QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC, stream_seq DESC) <= $per_consumer
ORDER BY account, stream, consumer, ts DESC;
