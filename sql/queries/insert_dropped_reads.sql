-- What reads of dropped messages found; a later read of the same message replaces a refusal only.
INSERT INTO dropped_message_reads BY NAME
SELECT account, stream, stream_seq, state, subject, stored_at::TIMESTAMPTZ AS stored_at, note,
       read_at::TIMESTAMPTZ AS read_at
FROM dropped_read_batch
ON CONFLICT (account, stream, stream_seq) DO UPDATE SET
    state = excluded.state, subject = excluded.subject, stored_at = excluded.stored_at,
    note = excluded.note, read_at = excluded.read_at
WHERE dropped_message_reads.state = 'refused';
