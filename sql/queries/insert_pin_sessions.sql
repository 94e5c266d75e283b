INSERT INTO pin_sessions BY NAME
SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts, duration_seconds, end_reason,
       gap_seconds, spans_gap
FROM session_batch;
