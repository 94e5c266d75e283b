INSERT OR REPLACE INTO capture_cursor (stream, stream_created, last_seq, last_ts, updated_at, awaiting)
VALUES ($stream, $stream_created, $last_seq, $last_ts, $updated_at, $awaiting);
